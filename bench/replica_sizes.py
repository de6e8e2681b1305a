"""Replica cost at several space sizes, through the real CLI against a real hub.

    .venv/bin/python -m bench.replica_sizes 1000 10000 [--keep]

Per size: a space loaded with N corpus entries (signed batches of 500), then timed:
``quire join --vault`` (snapshot + vault written), a first ``quire sync`` and a no-op
``quire sync`` (nothing to do), ``quire status``, and an incremental sync after 10 entries
changed on the hub. Prints one JSON line per size (seconds and peak RSS in MB), with the
CPU time (user + sys) of each ``quire`` process (``*_cpu``) and of the hub while it served
the step (``*_hub_cpu``): on a shared, loaded machine wall clock moves with the load, CPU
time much less.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench import corpus as corpus_mod
from bench.quire_side import Hub, Member, Publisher


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + sys) a running process used so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Cpu:
    """CPU time of the ``quire`` process run inside the block and of the hub meanwhile."""

    def __init__(self, hub_pid: int):
        self.hub_pid = hub_pid

    def __enter__(self) -> _Cpu:
        self.c0, self.h0 = _children_cpu(), _proc_cpu(self.hub_pid)
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu = round(_children_cpu() - self.c0, 2)
        self.hub = round(_proc_cpu(self.hub_pid) - self.h0, 2)


def run(sizes: list[int], keep: bool) -> None:
    root = Path(tempfile.mkdtemp(prefix="quire-replica-bench-"))
    env = dict(os.environ)
    env.pop("QUIRE_HOME", None)
    env.setdefault("QUIRE_HUB_ACCESS_TTL", str(6 * 3600))
    hub = Hub("hub", root, env)
    try:
        hub.init()
        hub.start()
        assert hub.server is not None
        hub_pid = hub.server.proc.pid
        owner = Member("owner", root, env)
        owner.join(hub.url, hub.enrollment_code)
        for n in sizes:
            data = corpus_mod.corpus(n)
            space = owner.create_space(f"s{n}")
            pub = Publisher(hub.url, owner.invite(space), name=f"bulk-{n}")
            pub.attach(space)
            t0 = time.perf_counter()
            for i in range(0, n, 500):
                pub.publish(data[i:i + 500])
            load = time.perf_counter() - t0
            m = Member(f"m{n}", root, env)
            vault = root / f"vault-{n}"
            row: dict[str, object] = {"n": n, "load_s": round(load, 2)}
            code = owner.invite(space)
            with _Cpu(hub_pid) as c:
                join = m.join(hub.url, code, vault)
            row["join_s"], row["join_rss_mb"] = round(join.seconds, 2), round(join.peak_rss_mb, 1)
            row["join_cpu"], row["join_hub_cpu"] = c.cpu, c.hub
            files = sum(1 for _ in vault.rglob("*.md"))
            row["files"] = files
            first = m.sync()
            row["sync1_s"] = round(first.seconds, 2)
            with _Cpu(hub_pid) as c:
                noop = m.sync()
            row["noop_s"], row["noop_rss_mb"] = round(noop.seconds, 2), round(noop.peak_rss_mb, 1)
            row["noop_cpu"] = c.cpu
            with _Cpu(hub_pid) as c:
                st = m.run("status")[0]
            row["status_s"], row["status_cpu"] = round(st.seconds, 2), c.cpu
            changed = corpus_mod.edited(data, 10)
            pub.publish(changed)
            with _Cpu(hub_pid) as c:
                inc = m.sync()
            row["incr10_s"], row["incr10_cpu"] = round(inc.seconds, 2), c.cpu
            probe = corpus_mod.vault_path(vault, changed[0]["id"])
            row["incr_ok"] = "Edited in round 1." in probe.read_text("utf-8")
            row["loadavg"] = [round(x, 2) for x in os.getloadavg()]
            print(json.dumps(row), flush=True)
            pub.close()
    finally:
        hub.stop()
        if keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    run([int(a) for a in args] or [1000], "--keep" in sys.argv)
