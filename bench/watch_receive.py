"""A reader's receive path in one process: the CPU one received change costs a watcher,
without the run queue of a fleet (standalone; not a timed test).

    python -m bench.watch_receive [--changes 200] [--profile FILE] [--out FILE]

1. Starts a hub (SQLite in a temp folder, ``bench.fleet``), joins one viewer machine with
   the real CLI and publishes ``--changes`` one-page batches through the protocol (a new
   page, then a change of it, in turn), while this process listens to the space's event
   stream and keeps every head event as a watcher's stream thread receives it.
2. Replays them, one at a time, into the viewer's watcher as ``quire watch`` runs it
   (``replica/watch/daemon.py``'s ``Watcher`` and ``SpaceSyncer``, on this thread): the
   head event's signature is checked as the stream thread checks it, the event handed to
   ``Watcher.handle`` and the sync it makes due run by ``Watcher.tick`` (the fast path:
   verify, apply, vault file, status files, activity lines), then the file events of its
   own vault write handed back as the files thread hands them (``own_writes``).
3. Prints and writes the CPU (user + system of this process, ``os.times``) per change,
   and with ``--profile`` a cProfile of the replay in CPU time (``time.process_time``).

The watchfiles thread's own work (inotify, its Rust loop) and the SSE parsing are not in
the figure: ``bench/save_latency.py`` measures whole watcher processes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.fleet import ROOT, Fleet, loadavg


def publish(b: Fleet, count: int, events: list[dict[str, Any]]) -> None:
    """``count`` one-page batches; returns once the event stream delivered all."""
    from replica.app.service import open_client
    from replica.machine.home import Home
    from shared.entry import make_entry
    from shared.ids import new_id
    from shared.signing import load_private
    from shared.wire import Op, build_batch

    home = Home(b.owner)
    hub = home.hubs()[0]
    key = load_private(hub.key_path)
    versions: dict[str, str] = {}
    with open_client(hub) as c:
        replica = c.register_replica(b.space["id"], "bench-publisher")
        h = c.head(b.space["id"])
        parent = (h["seq"], h["digest"])
        for i in range(count):
            eid = f"page/recv-{i // 2}"
            entry = make_entry({"id": eid, "title": f"receive {i // 2}",
                                "body": f"change {i}\n" + "a line of the page\n" * 20})
            batch = build_batch(key, batch_id=new_id(), replica_id=replica,
                                space=h["space"], epoch=h["epoch"], parent_seq=parent[0],
                                parent_digest=parent[1],
                                ops=[Op(entry, versions.get(eid))])
            receipt = c.push(b.space["id"], batch)
            versions[eid] = entry.version
            parent = (receipt["seq"], receipt["head"])
            deadline = time.monotonic() + 30
            while not events or events[-1].get("seq") != receipt["seq"]:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no head event for seq {receipt['seq']}")
                time.sleep(0.002)


def listen(member_home: Path, space_id: str, events: list[dict[str, Any]],
           stop: threading.Event) -> None:
    from replica.app.service import open_client
    from replica.machine.home import Home
    from shared.errors import TransferFailed

    home = Home(member_home)
    with open_client(home.hubs()[0]) as c:
        try:
            for ev in c.events(space_id, read_timeout=60):
                if stop.is_set():
                    return
                if ev.get("event") == "head":
                    events.append(ev["data"])
        except TransferFailed:
            return  # the hub stopped


def replay(member_home: Path, events: list[dict[str, Any]], profile: str | None
           ) -> dict[str, Any]:
    from replica.app.service import open_client
    from replica.ipc.lock import status_path
    from replica.machine.home import Home, write_json
    from replica.vault import markdown as md
    from replica.watch.core import Watcher, WatchSettings
    from replica.watch.syncer import SpaceSyncer

    home = Home(member_home)
    space = home.spaces()[0]
    syncer = SpaceSyncer(home, space)
    watcher = Watcher(sync=syncer, write_status=lambda doc: write_json(
        status_path(space), dict(doc, space={"id": space.space_id, "name": space.name}),
        durable=False), settings=WatchSettings.from_env(), apply=syncer.apply,
        own=syncer.own_writes, vault=os.fspath(space.vault))
    watcher.stream_up = True
    stream_client = open_client(home.hub(space.hub_id))
    # the watcher's state at start: caught up to where the events begin
    from replica.store.store import Store

    store = Store(space.store_path)  # where the join left it: before the first event
    head = store.head()
    store.close()
    watcher.head = head.to_json() if head else None
    first = events[0]["seq"]
    assert watcher.head is not None and watcher.head["seq"] == first - 1, watcher.head
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile(time.process_time)
    t0, w0 = os.times(), time.perf_counter()
    if prof:
        prof.enable()
    vault = Path(space.vault)
    for ev in events:
        stream_client.verified_head(ev, space.space_id)  # the stream thread's check
        watcher.handle(("remote", ev))
        watcher.tick()
        eid = ev["changes"][-1]["batch"]["ops"][-1]["entry"]["id"]
        path = os.fspath(md.entry_path(vault, eid))
        watcher.handle(("local", 1, [path]))  # its own write's file event
    if prof:
        prof.disable()
        prof.dump_stats(profile)
    t1, w1 = os.times(), time.perf_counter()
    stream_client.close()
    syncer.close()
    n = len(events)
    assert watcher.head is not None and watcher.head["seq"] == events[-1]["seq"]
    return {"changes": n, "applied": watcher.applied, "syncs": watcher.syncs,
            "scans": watcher.scans,
            "cpu_ms_per_change": round(1000 * ((t1.user - t0.user) + (t1.system - t0.system))
                                       / n, 3),
            "user_ms_per_change": round(1000 * (t1.user - t0.user) / n, 3),
            "sys_ms_per_change": round(1000 * (t1.system - t0.system) / n, 3),
            "wall_ms_per_change": round(1000 * (w1 - w0) / n, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--changes", type=int, default=200)
    ap.add_argument("--profile", default=None, help="cProfile of the replay (CPU time)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "watch_receive.json"))
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="quire-receive-bench-"))
    b = Fleet(root, None)
    stop = threading.Event()
    try:
        b.join(1, editors=0)
        member = b.members[0][0]
        events: list[dict[str, Any]] = []
        threading.Thread(target=listen, args=(member, b.space["id"], events, stop),
                         daemon=True).start()
        time.sleep(1)  # the stream is up (its first event is the next publication's)
        publish(b, args.changes, events)
        stop.set()
        load0 = loadavg()
        result = replay(member, [e for e in events if e.get("changes")], args.profile)
        result.update(loadavg_before=load0, loadavg_after=loadavg(), tree=str(ROOT))
    finally:
        b.close()
        shutil.rmtree(root, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
