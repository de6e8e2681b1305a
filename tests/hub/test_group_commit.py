"""Group commit: publications that arrive together share one transaction, each in its own
savepoint, so a refused one never sinks another (hub/store/db.py ``GroupCommit``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from hub.store.db import Store
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
