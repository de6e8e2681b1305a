"""Group commit: publications that arrive together share one transaction, each in its own
savepoint, so a refused one never sinks another (hub/store/db.py ``GroupCommit``)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError

from hub.store.db import Store
from hub.store.schema import audit
from shared.errors import BaseMismatch


@pytest.mark.parametrize("refusal", ["guard", "database"])
def test_a_refused_function_in_a_group_is_rolled_back_alone(tmp_path: Path,
                                                            db_url: str | None,
                                                            refusal: str) -> None:
    # "database": a statement that fails for good (not busy, not a serialization failure)
    # sinks only its own publication, like a guard refusal
    store = Store(db_url or f"sqlite:///{tmp_path / 'g.db'}")
    store.run_write(lambda c: c.execute(text("CREATE TABLE t (n INTEGER PRIMARY KEY)")))
    gc = store.commit_group
    first_in = threading.Event()
    release = threading.Event()
    results: dict[int, Any] = {}

    def fn(n: int) -> Any:
        def txn(conn: Any) -> int:
            if n == 0:
                first_in.set()
                assert release.wait(30)
            # every function sees the writes of the ones before it in the group
            before = conn.execute(text("SELECT count(*) FROM t")).scalar()
            conn.execute(text("INSERT INTO t (n) VALUES (:n)"), {"n": n})
            if n == 3 and refusal == "guard":
                raise BaseMismatch("refused after writing")
            if n == 3:
                conn.execute(text("SELECT * FROM no_such_table"))
            return int(before)
        return txn

    def call(n: int) -> None:
        try:
            results[n] = gc.run(fn(n))
        except (BaseMismatch, DBAPIError) as e:
            results[n] = e

    threads = [threading.Thread(target=call, args=(0,))]
    threads[0].start()
    assert first_in.wait(30)
    for n in range(1, 8):  # these queue up behind the leader's transaction
        threads.append(threading.Thread(target=call, args=(n,)))
        threads[-1].start()
    deadline = time.monotonic() + 30
    while len(gc._queue) < 7 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(gc._queue) == 7
    release.set()
    for t in threads:
        t.join(30)
    assert isinstance(results[3], BaseMismatch if refusal == "guard" else DBAPIError)
    with store.read() as conn:
        rows = [r[0] for r in conn.execute(text("SELECT n FROM t ORDER BY n"))]
        # the connection is usable after the group (no savepoint left open)
    store.run_write(lambda c: c.execute(text("INSERT INTO t (n) VALUES (100)")))
    assert rows == [0, 1, 2, 4, 5, 6, 7]
    # the second group ran in queue order and saw the first one's row, not the refused one's
    ok = sorted(v for k, v in results.items() if k != 3)
    assert ok == [0, 1, 2, 3, 4, 5, 6]
    assert not gc._leading and not gc._queue
    store.dispose()


def test_a_group_of_real_publications_rolls_back_only_the_refused_and_the_failing(
        hub_app: dict[str, Any]) -> None:
    """Four publications queue behind a paused one and commit as one group: A is accepted,
    B is refused by the guard (its base is A's entry before A changed it: the group's
    earlier writes are visible to it), C fails for good after writing its rows (a statement
    on a missing table), D is accepted. Only B and C are rolled back; the chain has no gap."""
    from starlette.testclient import TestClient

    from tests.kit.wire import ndjson, put, redeem

    hub, hooks = hub_app["hub"], hub_app["hooks"]
    owner = redeem(hub_app["client"], hub_app["code"], "owner")
    space = owner.create_space("group")
    assert owner.publish(space, [put("page/shared", "v1\n")]).status_code == 201
    v1 = owner.head(space)
    base = put("page/shared", "v1\n").entry.version
    quiet = TestClient(hub_app["app"], base_url="http://testhub", raise_server_exceptions=False)
    members = {n: redeem(quiet if n == "C" else hub_app["client"],
                             owner.invite(space, "editor"), n) for n in "ABCD"}
    bodies = {
        "lead": owner.batch(space, [put("page/lead")], head=v1),
        "A": members["A"].batch(space, [put("page/shared", "by A\n", base)], head=v1),
        "B": members["B"].batch(space, [put("page/shared", "by B\n", base)], head=v1),
        "C": members["C"].batch(space, [put("page/c")], head=v1),
        "D": members["D"].batch(space, [put("page/d")], head=v1),
    }
    name_of = {b["batch_id"]: n for n, b in bodies.items()}
    lead_in, release = threading.Event(), threading.Event()
    txns: dict[str, Any] = {}

    def in_commit(conn: Any, batch: Any, point: str) -> None:
        n = name_of[batch.batch_id]
        txns.setdefault(n, conn.get_transaction())
        if n == "lead" and point == "locked":
            lead_in.set()
            assert release.wait(60)
        if n == "C" and point == "written":  # its batch, entries and audit row are written
            conn.exec_driver_sql("SELECT * FROM no_such_table")

    results: dict[str, Any] = {}

    def send(n: str) -> None:
        m = owner if n == "lead" else members[n]
        results[n] = m.post(f"/v1/spaces/{space}/batches?rebase=1", bodies[n])

    hooks.in_commit = in_commit
    threads = []
    try:
        gc = hub.store.commit_group
        for i, n in enumerate(["lead", "A", "B", "C", "D"]):
            threads.append(threading.Thread(target=send, args=(n,)))
            threads[-1].start()
            if n == "lead":
                assert lead_in.wait(60)
            else:  # queued behind the lead, in this order
                deadline = time.monotonic() + 60
                while len(gc._queue) < i and time.monotonic() < deadline:
                    time.sleep(0.01)  # polling pace only
                assert len(gc._queue) == i
        release.set()
        for t in threads:
            t.join(60)
    finally:
        hooks.in_commit = None
        release.set()
        quiet.close()

    group = [txns[n] for n in "ABCD"]
    assert all(t is group[0] for t in group) and group[0] is not txns["lead"], \
        "A, B, C and D did not commit as one group"
    assert results["lead"].status_code == 201, results["lead"].text
    assert results["A"].status_code == 201, results["A"].text
    assert results["B"].status_code == 409
    assert results["B"].json()["error"]["code"] == "base_mismatch"
    assert results["C"].status_code == 500, results["C"].text
    assert results["D"].status_code == 201, results["D"].text
    seqs = [results[n].json()["receipt"]["seq"] for n in ("lead", "A", "D")]
    assert seqs == [v1["seq"] + 1, v1["seq"] + 2, v1["seq"] + 3]  # no gap where C was
    r = owner.get(f"/v1/spaces/{space}/changes", params={"epoch": v1["epoch"], "after": 0})
    chain = [x for x in ndjson(r.text) if "batch" in x]
    assert [c["batch"]["batch_id"] for c in chain][1:] == [
        bodies[n]["batch_id"] for n in ("lead", "A", "D")]
    entries = _snapshot(owner, space)
    assert entries["page/shared"]["body"] == "by A\n"
    assert "page/c" not in entries and set(entries) == {"page/shared", "page/lead", "page/d"}
    with hub.store.read() as conn:  # C's audit row went with its savepoint
        published = {json.loads(d)["batch_id"] for (d,) in conn.execute(
            select(audit.c.details).where(audit.c.chain == space, audit.c.action == "publish"))}
    assert published == {c["batch"]["batch_id"] for c in chain}
    owner.client.close()


def _snapshot(m: Any, space: str) -> dict[str, dict[str, Any]]:
    from tests.kit.wire import ndjson

    r = m.get(f"/v1/spaces/{space}/snapshot")
    assert r.status_code == 200, r.text
    return {x["entry"]["id"]: x["entry"] for x in ndjson(r.text) if "entry" in x}
