"""Run the benchmarks: Quire, a git daemon and pouchdb-server on the same corpus, in one run.

    python -m bench.run --quick     # under 2 minutes, small sizes
    python -m bench.run             # the full run (20k / 100k entries)

Prints a table with ratios to the peers and the goals, and writes
``bench/results/<timestamp>-<mode>.json``. Every system and scenario that cannot run is
reported with its reason in the status column; nothing is dropped silently.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import corpus as corpus_mod
from bench import files_side, readme, workfs
from bench import watcher_side as ws
from bench.loadgen import Target, publish_rate
from bench.peers.git_peer import GitPeer
from bench.peers.pouch_peer import PouchPeer
from bench.proc import Server, Unavailable, free_port, tree_cpu
from bench.quire_side import Hub, Member, Publisher
from bench.report import Results, Row, goals, machine, print_table, write_json

HERE = Path(__file__).resolve().parent
RESULTS_DIR = HERE / "results"

# Quick mode is a smoke run with a wall-clock budget: Quire scenarios that would start
# after it are reported as skipped (peers run first; they take seconds).
QUICK: dict[str, Any] = {
    "clients": 16, "publish_seconds": 3.0, "bulk": 2000, "batch": 500, "changed": 10,
    "clone_sizes": [500], "large": 500, "noop_sizes": [50, 500], "noop_repeats": 2,
    "budget_s": 90, "files": [200, 30],
}
FULL: dict[str, Any] = {
    "clients": 16, "publish_seconds": 20.0, "bulk": 20000, "batch": 500, "changed": 10,
    "clone_sizes": [20000, 100000], "large": 100000, "noop_sizes": [1000, 100000],
    "noop_repeats": 5, "budget_s": None, "files": [2000, 300],
}
SYSTEMS = ("bare", "quire", "git", "pouchdb")
PG_ADMIN_URL = os.environ.get("QUIRE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


class Skipped(Exception):
    """A scenario not run on purpose (not selected, or quick mode's budget spent)."""


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Bench:
    def __init__(self, cfg: dict[str, Any], root: Path, systems: tuple[str, ...] = SYSTEMS):
        self.cfg = cfg
        self.t0 = time.monotonic()
        self.systems = systems
        self.root = root
        self.results = Results()
        self.down: dict[str, str] = {}  # system -> why it cannot run at all
        self.env = dict(os.environ)
        self.env.pop("QUIRE_HOME", None)
        # access tokens outlive the run, so the protocol-level publishers need no refresh
        # (the replica CLI refreshes its own); it changes nothing on the measured paths
        self.env.setdefault("QUIRE_HUB_ACCESS_TTL", str(6 * 3600))
        self.info: dict[str, Any] = {}
        self._server_pid = 0  # the publish-rate server whose CPU is measured
        self.cleanups: list[Callable[[], None]] = []
        for family, names in (("bare", ["bare-starlette", "bare-signed"]), ("git", ["git"]),
                              ("pouchdb", ["pouchdb"]),
                              ("quire", ["quire", "quire-watched", "quire-sqlite",
                                         "quire-pg"])):
            if family not in systems:
                for name in names:
                    self.down[name] = "skipped: not selected (--systems)"

    # ------------------------------------------------------------ bookkeeping

    @contextmanager
    def attempt(self, scenario: str, size: int, system: str, unit: str,
                higher_is_better: bool = False) -> Iterator[Row]:
        """Yield a row to fill in; any failure becomes its status instead of a crash."""
        row = Row(scenario, size, system, "ok", None, unit, higher_is_better)
        down = self.down.get(system)
        if down:  # the body still runs (a context manager cannot skip it); it fails fast
            row.status = down
        try:
            yield row
        except Skipped as e:
            row.status = f"skipped: {e}"
        except Unavailable as e:
            if not down:
                row.status = f"unavailable: {e}"
        except Exception as e:  # noqa: BLE001 - a bug in one scenario must not stop the run
            if not down:
                row.status = f"failed: {type(e).__name__}: {e}"[:400]
                traceback.print_exc(file=sys.stderr)
        if down:
            row.value = None
        elif row.status == "ok" and row.value is None:
            row.status = "failed: no value recorded"
        self.results.add(row)
        log(f"{scenario} {size} {system}: {row.value} {unit} {row.status}")

    def gate(self, system: str) -> None:
        """Called first in every scenario body: refuse to start what must not run."""
        family = "quire" if system.startswith("quire") else \
            "bare" if system.startswith("bare-") else system
        if family not in self.systems:
            raise Skipped("not selected (--systems)")
        if system in self.down:
            raise Unavailable(self.down[system].split(": ", 1)[-1])
        budget = self.cfg.get("budget_s")
        if budget and family == "quire" and time.monotonic() - self.t0 > budget:
            raise Skipped(f"quick-mode budget ({budget} s) spent")

    def setup(self, system: str, fn: Callable[[], Any]) -> Any:
        """Run a setup step; on failure mark the system down with the reason."""
        if system in self.down:
            return None
        try:
            return fn()
        except Unavailable as e:
            self.down[system] = f"unavailable: {e}"
        except Exception as e:  # noqa: BLE001
            traceback.print_exc(file=sys.stderr)
            self.down[system] = f"failed: {type(e).__name__}: {e}"[:400]
        log(f"{system} is down: {self.down[system]}")
        return None

    # ------------------------------------------------------------ the run

    def sizes(self) -> list[int]:
        c = self.cfg
        return sorted({c["bulk"], c["large"], *c["clone_sizes"], *c["noop_sizes"]})

    def run(self) -> None:
        base = corpus_mod.base_corpus()
        data = {n: corpus_mod.corpus(n, base=base) for n in self.sizes()}
        self.info["corpus"] = {"python": corpus_mod.python_tag(), "base_entries": len(base),
                               "digests": {str(n): corpus_mod.digest(e) for n, e in data.items()}}
        log(f"corpus: base {len(base)} entries; sizes {self.sizes()}")
        self.publish_rates()
        if self.cfg.get("publish_only"):
            return
        self.git_scenarios(data)
        self.pouch_scenarios(data)
        self.quire_scenarios(data)
        self.files_scenarios()
        self.results.rows.sort(key=lambda r: (list(ORDER).index(r.scenario), r.size,
                                              SYSTEM_ORDER.get(r.system, 9)))

    # ------------------------------------------------------------ publish rate

    def publish_rates(self) -> None:
        c = self.cfg
        targets: list[tuple[str, Callable[[], Target]]] = [
            ("bare-starlette", self._bare_target),
            # for reference (not an issue goal): the protocol's own crypto and batch
            # validation with no database (bench/bare.py --signed)
            ("bare-signed", lambda: self._bare_target(signed=True)),
            ("quire-sqlite", lambda: self._hub_target("quire-sqlite", None)),
            ("quire-pg", lambda: self._hub_target("quire-pg", self._pg_url())),
        ]
        workers = c.get("workers", 1)
        for system, make in targets:
            with self.attempt("publish_rate", 1, system, "batches/s", True) as row:
                self.gate(system)
                if system == "quire-sqlite" and workers > 1:
                    raise Skipped("a SQLite hub is served by one process (hub/workers.py)")
                target = make()
                log(f"publish rate: {system}, {c['clients']} clients, {c['publish_seconds']}s, "
                    f"{workers} server process(es)")
                db = self._postmaster() if system == "quire-pg" else 0
                cpu0, load0 = tree_cpu(self._server_pid), os.getloadavg()[0]
                db0 = tree_cpu(db) if db else 0.0
                res = publish_rate(target, c["clients"], c["publish_seconds"])
                cpu = tree_cpu(self._server_pid) - cpu0
                # every backend of the local server: other users' work there counts too
                db_cpu = round(tree_cpu(db) - db0, 2) if db else None
                row.details = res.summary()
                answered = res.accepted + res.retried
                # user+sys of the server and its workers over the window, per answer
                row.details.update(workers=workers, server_cpu_s=round(cpu, 2),
                                   cpu_ms_per_request=round(1000 * cpu / answered, 3)
                                   if answered else None,
                                   load_avg=[round(load0, 2), round(os.getloadavg()[0], 2)])
                if db_cpu is not None:
                    row.details["postgres_cpu_s"] = db_cpu
                if res.accepted == 0:
                    raise Unavailable(f"no batch accepted: {res.first_error}")
                row.value = res.accepted / res.seconds

    def _bare_target(self, signed: bool = False) -> Target:
        from shared.ids import new_id
        from shared.signing import new_private_key

        port = free_port()
        server = Server("bare-signed" if signed else "bare-starlette",
                        [sys.executable, "-m", "bench.bare", "--port", str(port), "--workers",
                         str(self.cfg.get("workers", 1)), *(["--signed"] if signed else [])],
                        log_dir=self.root, env=self.env)
        self.cleanups.append(server.stop)
        server.wait_http(f"http://127.0.0.1:{port}/healthz")
        self._server_pid = server.pid
        # the client does the same work as against the hub: sign a batch and, when the hub
        # uses DPoP, a proof per request (the bare endpoint ignores both)
        import importlib.util

        scheme = "DPoP" if importlib.util.find_spec("shared.dpop") else "Bearer"
        return Target(f"http://127.0.0.1:{port}", new_id(), "bench-token", [new_id()],
                      new_private_key(), new_id(), 0, "0" * 64, scheme=scheme)

    def _postmaster(self) -> int:
        """The local PostgreSQL server's pid (its backends are its children), or 0."""
        try:
            import psycopg

            with psycopg.connect(PG_ADMIN_URL, connect_timeout=5) as conn:
                backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            stat = Path(f"/proc/{backend}/stat").read_text()
            return int(stat.rsplit(")", 1)[1].split()[1])
        except Exception:  # noqa: BLE001 - a remote or unreadable server: not measured
            return 0

    def _pg_url(self) -> str:
        try:
            import psycopg
        except ImportError as e:
            raise Unavailable("psycopg not installed") from e
        name = f"quire_bench_{os.getpid()}_{int(time.time())}"
        try:
            with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
        except psycopg.Error as e:
            raise Unavailable(f"PostgreSQL at {PG_ADMIN_URL}: {str(e).strip()[:150]}") from e

        def drop() -> None:
            try:
                with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            except psycopg.Error:
                pass

        self.cleanups.append(drop)
        return PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name

    def _new_hub(self, name: str, db_url: str | None) -> tuple[Hub, Member]:
        hub = Hub(name, self.root, self.env, db_url, workers=self.cfg.get("workers", 1))
        hub.init()
        hub.start()
        assert hub.server is not None
        self._server_pid = hub.server.pid
        self.cleanups.append(hub.stop)
        owner = Member(f"{name}-owner", self.root, self.env)
        owner.join(hub.url, hub.enrollment_code)
        return hub, owner

    def _hub_target(self, name: str, db_url: str | None) -> Target:
        hub, owner = self._new_hub(name, db_url)
        if name == "quire-sqlite":
            self.hub, self.owner = hub, owner  # reused by the other scenarios
        space = owner.create_space("load")
        pub = Publisher(hub.url, owner.invite(space), name="bench-load")
        pub.attach(space)
        replicas = [pub.replica_id]
        for _ in range(self.cfg["clients"] - 1):
            r = pub.http.post(f"/v1/spaces/{space}/replicas", json={"name": "bench"})
            replicas.append(r.json()["replica_id"])
        pub.close()
        return Target(hub.url, pub.space, pub.token, replicas, pub.key, pub.epoch, pub.seq,
                      pub.digest, scheme=pub.scheme, public_url=pub.public_url)

    # ------------------------------------------------------------ Quire

    def quire_scenarios(self, data: dict[int, list[dict[str, Any]]]) -> None:
        c = self.cfg
        if not hasattr(self, "hub") and "quire" not in self.down:
            self.setup("quire", lambda: self._hub_target("quire-sqlite", None))
        if not hasattr(self, "hub") and "quire" not in self.down:
            self.down["quire"] = self.down.get("quire-sqlite", "unavailable: no hub")
        spaces: dict[int, tuple[str, Publisher]] = {}
        for size in self.sizes():
            with self.attempt("bulk_publish", size, "quire", "entries/s", True) as row:
                self.gate("quire")
                space = self.owner.create_space(f"s{size}")
                pub = Publisher(self.hub.url, self.owner.invite(space), name=f"bulk-{size}")
                self.cleanups.append(pub.close)
                pub.attach(space)
                start = time.perf_counter()
                entries = data[size]
                for i in range(0, len(entries), c["batch"]):
                    pub.publish(entries[i:i + c["batch"]])
                seconds = time.perf_counter() - start
                spaces[size] = (space, pub)
                row.value = size / seconds
                row.details = {"seconds": round(seconds, 3), "batches": pub.seq}
            if size != c["bulk"]:  # loading the other sizes is setup, not the scenario
                self.results.rows.pop()
        big = c["large"]
        with self.attempt("hub_rss_snapshot", big, "quire", "MB") as row:
            self.gate("quire")
            if big not in spaces:
                raise Unavailable("space was not loaded")
            assert self.hub.server is not None
            self.hub.server.reset_peak()
            before = self.hub.server.rss_mb()
            start = time.perf_counter()
            lines = spaces[big][1].snapshot_lines()
            row.details = {"lines": lines, "seconds": round(time.perf_counter() - start, 3),
                           "rss_before_mb": before}
            row.value = self.hub.server.peak_rss_mb()
        # the large space first (clone, incremental, no-op), then the other sizes, so a
        # quick run that spends its budget loses the least informative rows
        replicas: dict[int, Member] = {}
        order = [big] + sorted({*c["clone_sizes"], *c["noop_sizes"]} - {big}, reverse=True)
        for size in order:
            self._quire_clone(size, spaces, replicas)
            if size == big:
                self._quire_incremental(big, spaces, replicas, data)
                self._quire_verify(big, replicas)
                self._quire_watched(big, spaces, replicas, data)
            if size in c["noop_sizes"]:
                with self.attempt("noop_sync", size, "quire", "s") as row:
                    self.gate("quire")
                    if size not in replicas:
                        raise Unavailable("no replica of this size")
                    times = [replicas[size].sync().seconds for _ in range(c["noop_repeats"])]
                    row.value = statistics.median(times)
                    row.details = {"runs_s": [round(x, 3) for x in times]}

    def _quire_clone(self, size: int, spaces: dict[int, tuple[str, Publisher]],
                     replicas: dict[int, Member]) -> None:
        c = self.cfg
        scenario = "clone" if size in c["clone_sizes"] else "setup_clone"
        with self.attempt(scenario, size, "quire", "s") as row:
            self.gate("quire")
            if size not in spaces:
                raise Unavailable("space was not loaded")
            space, _pub = spaces[size]
            member = Member(f"m{size}", self.root, self.env)
            vault = self.root / f"vault-{size}"
            assert self.hub.server is not None
            self.hub.server.reset_peak()
            join = member.join(self.hub.url, self.owner.invite(space), vault)
            sync = member.sync()
            hub_peak = self.hub.server.peak_rss_mb()
            files = sum(1 for _ in vault.rglob("*.md"))
            if files < size:
                raise Unavailable(f"vault has {files} of {size} entries after join+sync")
            replicas[size] = member
            row.value = join.seconds + sync.seconds
            row.details = {"join_s": round(join.seconds, 3), "sync_s": round(sync.seconds, 3),
                           "replica_peak_rss_mb": round(max(join.peak_rss_mb,
                                                            sync.peak_rss_mb), 1),
                           "hub_peak_rss_mb": hub_peak, "files": files}
        if scenario == "setup_clone":
            self.results.rows.pop()
        elif size == c["large"]:
            with self.attempt("replica_rss_clone", size, "quire", "MB") as mrow:
                if not row.ok:
                    raise Unavailable(row.status)
                mrow.value = row.details["replica_peak_rss_mb"]

    def _quire_verify(self, size: int, replicas: dict[int, Member]) -> None:
        """``quire verify`` of the large replica: the store against the last
        signed head (its state root recomputed), every vault file against the store. The
        command's whole wall time, start-up included."""
        with self.attempt("verify", size, "quire", "s") as row:
            self.gate("quire")
            if size not in replicas:
                raise Unavailable("no replica of this size")
            t, doc = replicas[size].run("verify")
            if not doc.get("ok"):
                raise Unavailable(f"verify found differences: {str(doc)[:200]}")
            row.value = t.seconds
            row.details = {"peak_rss_mb": round(t.peak_rss_mb, 1)}

    def _quire_incremental(self, big: int, spaces: dict[int, tuple[str, Publisher]],
                           replicas: dict[int, Member],
                           data: dict[int, list[dict[str, Any]]]) -> None:
        c = self.cfg
        with self.attempt("incremental", big, "quire", "s") as row:
            self.gate("quire")
            if big not in replicas:
                raise Unavailable("no replica of the large space")
            space, pub = spaces[big]
            changed = corpus_mod.edited(data[big], c["changed"])
            pub.publish(changed)
            t = replicas[big].sync()
            probe = corpus_mod.vault_path(self.root / f"vault-{big}", changed[0]["id"])
            if "Edited in round 1." not in probe.read_text("utf-8"):
                raise Unavailable("the change did not reach the vault after one sync")
            row.value = t.seconds
            row.details = {"peak_rss_mb": round(t.peak_rss_mb, 1)}

    def _quire_watched(self, big: int, spaces: dict[int, tuple[str, Publisher]],
                       replicas: dict[int, Member],
                       data: dict[int, list[dict[str, Any]]]) -> None:
        """The large replica with ``quire watch`` running (bench/watcher_side.py):
        a no-op ``quire sync`` and ``quire status --json`` served by the watcher, and 10
        entries changed by another member, then ``quire sync``: the whole ``quire`` process's
        wall time each, start-up included, as a person or an agent runs them. Each must be
        served and scanned by the watcher's journal, or the row fails."""
        c = self.cfg
        member = replicas.get(big)
        with contextlib.ExitStack() as stack:
            watcher = None
            if member is not None and "quire" not in self.down:
                watcher = self.setup("quire-watched",
                                     lambda: stack.enter_context(ws.watching(member)))
            noop: dict[str, Any] = {}
            for scenario, command in (("noop_sync", "sync"), ("status", "status")):
                with self.attempt(scenario, big, "quire-watched", "s") as row:
                    self.gate("quire-watched")
                    if watcher is None or member is None:
                        raise Unavailable("no watcher (no replica of the large space)")
                    noop = noop or ws.served_noop(member, watcher, runs=c["noop_repeats"])
                    row.value = noop[command]["median_s"]
                    row.details = dict(noop[command], load=noop["load"],
                                       how="served by the running watcher")
            with self.attempt("incremental", big, "quire-watched", "s") as row:
                self.gate("quire-watched")
                if watcher is None or member is None:
                    raise Unavailable("no watcher (no replica of the large space)")
                changed = corpus_mod.edited(data[big], c["changed"], 2)  # round 1: no watcher
                probe = (corpus_mod.vault_path(self.root / f"vault-{big}", changed[0]["id"]),
                         "Edited in round 2.")
                got = ws.served_incremental(member, watcher, spaces[big][1], changed, probe)
                row.value = got["seconds"]
                row.details = dict(got, how="published by another member, then quire sync "
                                            "served by the running watcher")

    # ------------------------------------------------------------ notes and attachments

    def files_scenarios(self) -> None:
        """Clone and incremental sync of a vault of notes and attachments (images, PDFs,
        some over 1 MiB; bench/files_side.py), Quire beside git on the same files. The
        size is the number of files (notes + attachments)."""
        notes, attachments = self.cfg["files"]
        size = notes + attachments
        want = files_side.build(self.root / "files-corpus", notes, attachments)
        changed = files_side.change(want)
        after = dict(want, **changed)
        self.info["files"] = {"notes": notes, "attachments": attachments, "files": len(want),
                              "megabytes": round(sum(map(len, want.values())) / 2**20, 1)}
        git: GitPeer | None = getattr(self, "git_peer", None)
        work = clone = None
        with self.attempt("clone_files", size, "git", "s") as row:
            self.gate("git")
            assert git is not None
            work = git.create_files("files", want)
            clone = self.root / "git" / "clone-files"
            t = git.clone("files", clone)
            row.value, row.details = t.seconds, {"cpu_s": round(t.cpu_s, 3)}
        with self.attempt("incremental_files", size, "git", "s") as row:
            self.gate("git")
            if git is None or work is None or clone is None:
                raise Unavailable("no clone of the files")
            git.change_files_and_push(work, changed)
            t = git.pull(clone)
            row.value, row.details = t.seconds, {"cpu_s": round(t.cpu_s, 3)}
        member = None
        vault = self.root / "vault-files"
        with self.attempt("clone_files", size, "quire", "s") as row:
            self.gate("quire")
            if not hasattr(self, "hub"):
                raise Unavailable("no hub")
            space = self.owner.create_space("files")
            author = Member("files-author", self.root, self.env)
            author_vault = self.root / "vault-files-author"
            author.join(self.hub.url, self.owner.invite(space), author_vault)
            files_side.write(author_vault, want)
            author.sync()
            member = Member("files-clone", self.root, self.env)
            join = member.join(self.hub.url, self.owner.invite(space), vault)
            sync = member.sync()
            files_side.check_same(vault, want)
            row.value = join.seconds + sync.seconds
            row.details = {"join_s": round(join.seconds, 3), "sync_s": round(sync.seconds, 3),
                           "cpu_s": round(join.cpu_s + sync.cpu_s, 3),
                           "peak_rss_mb": round(max(join.peak_rss_mb, sync.peak_rss_mb), 1)}
        with self.attempt("incremental_files", size, "quire", "s") as row:
            self.gate("quire")
            if member is None:
                raise Unavailable("no clone of the files")
            files_side.write(author_vault, changed)
            author.sync()
            t = member.sync()
            files_side.check_same(vault, after)
            row.value, row.details = t.seconds, {"cpu_s": round(t.cpu_s, 3),
                                                 "peak_rss_mb": round(t.peak_rss_mb, 1)}

    # ------------------------------------------------------------ git

    def git_scenarios(self, data: dict[int, list[dict[str, Any]]]) -> None:
        c = self.cfg
        root = self.root / "git"
        git = self.setup("git", lambda: GitPeer(root, self.env))
        self.git_peer = git
        if git is not None:
            self.setup("git", git.start)
            self.cleanups.append(git.stop)
            self.info["git"] = git.version
        with self.attempt("bulk_publish", c["bulk"], "git", "entries/s", True) as row:
            self.gate("git")
            seconds = git.bulk_push("bulk", data[c["bulk"]], c["batch"])
            row.value = c["bulk"] / seconds
            row.details = {"seconds": round(seconds, 3),
                           "how": f"commit + push per {c['batch']} files"}
        works: dict[int, Path] = {}
        clones: dict[int, Path] = {}
        for size in sorted({*c["clone_sizes"], *c["noop_sizes"], c["large"]}):
            scenario = "clone" if size in c["clone_sizes"] else "setup_clone"
            with self.attempt(scenario, size, "git", "s") as row:
                self.gate("git")
                works[size] = git.create(f"s{size}", data[size])
                dest = root / f"clone-{size}"
                t = git.clone(f"s{size}", dest)
                clones[size] = dest
                row.value = t.seconds
                row.details = {"peak_rss_mb": round(t.peak_rss_mb, 1)}
            if scenario == "setup_clone":
                self.results.rows.pop()
            elif size == c["large"]:
                with self.attempt("replica_rss_clone", size, "git", "MB") as mrow:
                    if not row.ok:
                        raise Unavailable(row.status)
                    mrow.value = row.details["peak_rss_mb"]
        big = c["large"]
        with self.attempt("incremental", big, "git", "s") as row:
            self.gate("git")
            if big not in clones:
                raise Unavailable("no clone of the large repository")
            push = git.change_and_push(works[big], corpus_mod.edited(data[big], c["changed"]))
            t = git.pull(clones[big])
            row.value = t.seconds
            row.details = {"push_s": round(push.seconds, 3), "peak_rss_mb": round(t.peak_rss_mb, 1)}
        for size in c["noop_sizes"]:
            with self.attempt("noop_sync", size, "git", "s") as row:
                self.gate("git")
                if size not in clones:
                    raise Unavailable("no clone of this size")
                times = [git.pull(clones[size]).seconds for _ in range(c["noop_repeats"])]
                row.value = statistics.median(times)
                row.details = {"runs_s": [round(x, 3) for x in times], "how": "git pull"}
            # what a sync without a watcher is held to at the large size: git's own look at
            # every file of the work tree (issue 33)
            with self.attempt("noop_sync", size, "git-status", "s") as row:
                self.gate("git")
                if size not in clones:
                    raise Unavailable("no clone of this size")
                times = [git.status(clones[size]).seconds for _ in range(c["noop_repeats"])]
                row.value = statistics.median(times)
                row.details = {"runs_s": [round(x, 3) for x in times], "how": "git status"}

    # ------------------------------------------------------------ PouchDB

    def pouch_scenarios(self, data: dict[int, list[dict[str, Any]]]) -> None:
        c = self.cfg
        root = self.root / "pouch"
        root.mkdir(parents=True, exist_ok=True)
        pouch = self.setup("pouchdb", lambda: PouchPeer(root, self.env))
        if pouch is not None:
            self.setup("pouchdb", pouch.start)
            self.cleanups.append(pouch.stop)
            self.info["pouchdb_server"] = pouch.version
        loaded: set[int] = set()
        for size in self.sizes():
            with self.attempt("bulk_publish", size, "pouchdb", "entries/s", True) as row:
                self.gate("pouchdb")
                seconds = pouch.bulk_load(f"s{size}", data[size], c["batch"])
                loaded.add(size)
                row.value = size / seconds
                row.details = {"seconds": round(seconds, 3), "how": "_bulk_docs per 500"}
            if size != c["bulk"]:
                self.results.rows.pop()
        targets: dict[int, Path] = {}
        for size in sorted({*c["clone_sizes"], *c["noop_sizes"], c["large"]}):
            scenario = "clone" if size in c["clone_sizes"] else "setup_clone"
            with self.attempt(scenario, size, "pouchdb", "s") as row:
                self.gate("pouchdb")
                if size not in loaded:
                    raise Unavailable("database was not loaded")
                target = root / f"local-{size}"
                assert pouch.server is not None
                pouch.server.reset_peak()
                t = pouch.replicate(f"s{size}", target)
                written = t.details.get("docs_written")  # type: ignore[attr-defined]
                if written != size:
                    raise Unavailable(f"replication wrote {written} of {size} documents")
                targets[size] = target
                row.value = t.seconds
                row.details = dict(t.details, peak_rss_mb=round(t.peak_rss_mb, 1),  # type: ignore[attr-defined]
                                   server_peak_rss_mb=pouch.server.peak_rss_mb())
            if scenario == "setup_clone":
                self.results.rows.pop()
            elif size == c["large"]:
                with self.attempt("replica_rss_clone", size, "pouchdb", "MB") as mrow:
                    if not row.ok:
                        raise Unavailable(row.status)
                    mrow.value = row.details["peak_rss_mb"]
                with self.attempt("hub_rss_snapshot", size, "pouchdb", "MB") as mrow:
                    if not row.ok:
                        raise Unavailable(row.status)
                    mrow.value = row.details["server_peak_rss_mb"]
                    mrow.details = {"how": "pouchdb-server (in memory) peak while replicating"}
        big = c["large"]
        with self.attempt("incremental", big, "pouchdb", "s") as row:
            self.gate("pouchdb")
            if big not in targets:
                raise Unavailable("no local copy of the large database")
            pouch.bulk_load(f"s{big}", corpus_mod.edited(data[big], c["changed"]), c["batch"])
            t = pouch.replicate(f"s{big}", targets[big])
            row.value = t.seconds
            row.details = dict(t.details)  # type: ignore[attr-defined]
        for size in c["noop_sizes"]:
            with self.attempt("noop_sync", size, "pouchdb", "s") as row:
                self.gate("pouchdb")
                if size not in targets:
                    raise Unavailable("no local copy of this size")
                times = [pouch.replicate(f"s{size}", targets[size]).seconds
                         for _ in range(c["noop_repeats"])]
                row.value = statistics.median(times)
                row.details = {"runs_s": [round(x, 3) for x in times]}

    def close(self) -> None:
        for fn in reversed(self.cleanups):
            try:
                fn()
            except Exception:  # noqa: BLE001 - cleanup must go on
                traceback.print_exc(file=sys.stderr)


ORDER = {"publish_rate": 0, "bulk_publish": 1, "clone": 2, "incremental": 3, "noop_sync": 4,
         "status": 5, "replica_rss_clone": 6, "hub_rss_snapshot": 7, "verify": 8,
         "clone_files": 9, "incremental_files": 10}
SYSTEM_ORDER = {"quire": 0, "quire-watched": 0.5, "quire-sqlite": 0, "quire-pg": 1,
                "bare-starlette": 2, "bare-signed": 2.5, "git": 3,
                "pouchdb": 4}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes, whole run under 2 min")
    p.add_argument("--out", type=Path, default=None, help="JSON result path")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    p.add_argument("--fs", default="journal",
                   help="where the run writes: journal (a fresh journaled ext4 image, "
                        "loop-mounted; the default, see bench/workfs.py), tmp, or a folder")
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help=f"comma-separated subset of {','.join(SYSTEMS)} (default: all)")
    p.add_argument("--publish-only", action="store_true",
                   help="run only the publish-rate scenario (bare, quire-sqlite, quire-pg)")
    p.add_argument("--clients", type=int, default=None,
                   help="publish-rate clients (default 16; 1 gives the single-client latency)")
    p.add_argument("--workers", type=int, default=1,
                   help="server processes for the publish rate: `quire hub serve --workers N` "
                        "and the bare endpoint on N uvicorn workers (SQLite: 1 only)")
    p.add_argument("--seconds", type=float, default=None,
                   help="publish-rate window in seconds (default 20, quick 3)")
    args = p.parse_args(argv)
    mode = "quick" if args.quick else "full"
    cfg = dict(QUICK if args.quick else FULL)
    if args.publish_only:
        cfg.update(publish_only=True, bulk=0, large=0, clone_sizes=[], noop_sizes=[0])
        mode += "-publish"
    if args.clients is not None:
        cfg["clients"] = args.clients
    if args.seconds is not None:
        cfg["publish_seconds"] = args.seconds
    cfg["workers"] = args.workers
    _byte_compile()
    started = time.time()
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    cfg["commit"] = readme.commit_of_tree()  # what this run measures (taken at its start)
    systems = tuple(x.strip() for x in args.systems.split(",") if x.strip())
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        p.error(f"unknown systems: {', '.join(sorted(unknown))}")
    if args.keep:
        os.environ["QUIRE_BENCH_KEEP"] = "1"
    # hundreds of thousands of files: removed after the results are out (bench/workfs.py)
    with workfs.work_folder(args.fs, f"quire-bench-{mode}-") as (root, fs):
        cfg["filesystem"] = fs
        bench = Bench(cfg, root, systems)
        log(f"{mode} run in {root} ({fs.get('kind')}: {fs.get('type', '?')}, "
            f"journal {fs.get('journal', '?')}) {fs.get('note', '')}")
        try:
            bench.run()
        finally:
            bench.close()
        return _report(bench, cfg, mode, started, load_at_start, args.out)


def _byte_compile() -> None:
    """Write the project's .pyc files, as an installed package has them: with
    PYTHONDONTWRITEBYTECODE set (as in our shells) every ``quire`` process would compile its
    ~60 modules from source, ~50-60 ms of CPU a command that no user pays."""
    import compileall

    root = HERE.parent
    for pkg in ("hub", "replica", "shared"):
        compileall.compile_dir(root / pkg, quiet=1, workers=0)


def _report(bench: Bench, cfg: dict[str, Any], mode: str, started: float,
            load_at_start: list[float], out: Path | None) -> int:
    goal_list = goals(bench.results, cfg)
    if cfg.get("publish_only"):  # the other goals have no rows in this run
        goal_list = [g for g in goal_list if g.text.startswith("publish rate")]
    elapsed = time.time() - started
    title = (f"Quire benchmarks ({mode}, {elapsed:.0f} s, {os.cpu_count()} cores, "
             f"load {load_at_start[0]:.1f}→{os.getloadavg()[0]:.1f}, "
             f"Python {corpus_mod.python_tag()})")
    print_table(bench.results, cfg, goal_list, title)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    label = mode if set(bench.systems) == set(SYSTEMS) else f"{mode}-{'+'.join(bench.systems)}"
    out = out or RESULTS_DIR / f"{stamp}-{label}.json"
    peers = {k: v for k, v in bench.info.items() if k in ("git", "pouchdb_server")}
    doc = {"mode": mode, "systems": list(bench.systems), "started_at": stamp,
           "commit": cfg.get("commit", ""),
           "elapsed_s": round(elapsed, 1), "config": cfg,
           "machine": dict(machine(), load_avg_at_start=load_at_start), "peers": peers,
           "corpus": bench.info.get("corpus"), "down": bench.down}
    write_json(out, doc, bench.results, goal_list)
    print(f"results: {out}")
    if mode == "full" and set(bench.systems) == set(SYSTEMS) and readme.update(out):
        print("README.md: performance tables updated from this run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
