"""Replica cost at several space sizes, through the real CLI against a real hub.

    .venv/bin/python -m bench.replica_sizes 1000 10000 [--keep]

Per size: a space loaded with N corpus entries (signed batches of 500), then timed:
``quire join --vault`` (snapshot + vault written), a first ``quire sync`` and a no-op
``quire sync`` (nothing to do), ``quire status``, and an incremental sync after 10 entries
changed on the hub. Prints one JSON line per size (seconds and peak RSS in MB).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench import corpus as corpus_mod
from bench.quire_side import Hub, Member, Publisher


def run(sizes: list[int], keep: bool) -> None:
    root = Path(tempfile.mkdtemp(prefix="quire-replica-bench-"))
    env = dict(os.environ)
    env.pop("QUIRE_HOME", None)
    env.setdefault("QUIRE_HUB_ACCESS_TTL", str(6 * 3600))
    hub = Hub("hub", root, env)
    try:
        hub.init()
        hub.start()
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
            join = m.join(hub.url, owner.invite(space), vault)
            row["join_s"], row["join_rss_mb"] = round(join.seconds, 2), round(join.peak_rss_mb, 1)
            files = sum(1 for _ in vault.rglob("*.md"))
            row["files"] = files
            first = m.sync()
            row["sync1_s"] = round(first.seconds, 2)
            noop = m.sync()
            row["noop_s"], row["noop_rss_mb"] = round(noop.seconds, 2), round(noop.peak_rss_mb, 1)
            st = m.run("status")[0]
            row["status_s"] = round(st.seconds, 2)
            changed = corpus_mod.edited(data, 10)
            pub.publish(changed)
            inc = m.sync()
            row["incr10_s"] = round(inc.seconds, 2)
            probe = corpus_mod.vault_path(vault, changed[0]["id"])
            row["incr_ok"] = "Edited in round 1." in probe.read_text("utf-8")
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
