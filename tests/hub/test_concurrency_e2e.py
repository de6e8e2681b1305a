"""Real `quire hub serve` processes, racing publishers: every batch lands exactly once."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx2
import pytest

from shared.digest import verify_chain
from tests.kit.host import REPO, free_port
from tests.kit.hubproc import hub_cmd, init_hub, serve_hub
from tests.kit.pg import pg_database, require_pg
from tests.kit.wire import ndjson, put, redeem

# 8 clients racing, 25 publications each: every publication after the first overlaps others
# (200 in all; 400 added a minute of CPU to the suite and no interleaving 200 lacks)
CLIENTS = 8
PER_CLIENT = 25


def _race(urls: list[str], code: str) -> None:
    clients = [httpx2.Client(base_url=urls[i % len(urls)], timeout=30) for i in range(CLIENTS + 1)]
    try:
        _race_with(clients, code)
    finally:
        for c in clients:
            c.close()


def _race_with(clients: list[httpx2.Client], code: str) -> None:
    owner_client = clients[-1]
    owner = redeem(owner_client, code, "owner")
    space = owner.create_space("race")
    members = []
    for i in range(CLIENTS):
        members.append(redeem(clients[i], owner.invite(space, "editor"), f"client-{i}"))
    errors: list[str] = []
    attempts = [0] * CLIENTS

    def run(i: int) -> None:
        m = members[i]
        head = m.head(space)
        for n in range(PER_CLIENT):
            op = [put(f"page/c{i}/n{n}", f"client {i} batch {n}\n")]
            while True:
                attempts[i] += 1
                r = m.post(f"/v1/spaces/{space}/batches", m.batch(space, op, head=head))
                if r.status_code == 201:
                    rec = r.json()["receipt"]
                    head = dict(head, seq=rec["seq"], digest=rec["head"])
                    break
                err = r.json()["error"]
                if err["code"] != "head_changed":
                    errors.append(f"client {i}: {r.status_code} {err}")
                    return
                head = dict(head, seq=err["details"]["seq"], digest=err["details"]["digest"])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors[:5]

    total = CLIENTS * PER_CLIENT
    head = owner.head(space)
    assert head["seq"] == total
    lines: list[dict[str, Any]] = []
    after = 0
    while True:
        page = ndjson(owner.get(f"/v1/spaces/{space}/changes?after={after}&limit=5000").text)
        lines += page[:-1]
        if not page[-1]["end"]["more"]:
            break
        after = page[-1]["end"]["seq"]
    assert [x["seq"] for x in lines] == list(range(1, total + 1))  # no gaps, no repeats
    verify_chain(space, head["epoch"], [(x["seq"], x["batch"]["digest"], x["head"])
                                        for x in lines])
    assert lines[-1]["head"] == head["digest"]
    per_replica: dict[str, int] = {}
    for x in lines:
        per_replica[x["batch"]["replica_id"]] = per_replica.get(x["batch"]["replica_id"], 0) + 1
    assert sorted(per_replica.values()) == [PER_CLIENT] * CLIENTS
    state = {}
    for x in lines:
        for op in x["batch"]["ops"]:
            state[op["entry"]["id"]] = op["entry"]
    snap = ndjson(owner.get(f"/v1/spaces/{space}/snapshot").text)
    assert snap[0]["head"]["seq"] == total
    assert {x["entry"]["id"]: x["entry"] for x in snap[1:-1]} == state
    print(f"attempts per client: {attempts}")


@pytest.mark.e2e
@pytest.mark.slow
def test_three_processes_on_postgresql_accept_each_batch_exactly_once(tmp_path: Path) -> None:
    require_pg()
    with pg_database() as url:
        data = tmp_path / "hub"
        code = init_hub(data, url)
        hubs = [serve_hub(data, db=url) for _ in range(3)]
        try:
            _race([h.url for h in hubs], code)
        finally:
            for h in hubs:
                h.stop()


@pytest.mark.e2e
@pytest.mark.slow
def test_one_process_on_sqlite_accepts_each_batch_exactly_once(tmp_path: Path) -> None:
    data = tmp_path / "hub"
    code = init_hub(data)
    hub = serve_hub(data)
    try:
        _race([hub.url], code)
    finally:
        hub.stop()


@pytest.mark.e2e
@pytest.mark.slow
def test_one_serve_with_two_workers_on_postgresql_accepts_each_batch_exactly_once(
        tmp_path: Path) -> None:
    require_pg()
    with pg_database() as url:
        data = tmp_path / "hub"
        code = init_hub(data, url)
        hub = serve_hub(data, db=url, workers=2)
        try:
            # two worker processes under one supervisor, both accepting on the one port
            kids = Path(f"/proc/{hub.proc.pid}/task/{hub.proc.pid}/children").read_text()
            assert len(kids.split()) == 2
            _race([hub.url], code)
        finally:
            hub.stop()


def test_workers_above_one_on_sqlite_are_refused_and_change_nothing(tmp_path: Path) -> None:
    # on SQLite the DPoP replay cache and the rate limits are in memory: a second worker
    # would accept a proof the first already saw (hub/workers.py)
    data = tmp_path / "hub"
    init_hub(data)
    before = (data / "hub.db").read_bytes()
    r = subprocess.run(hub_cmd("serve", "--data", str(data), "--port", str(free_port()),
                                   "--workers", "2", "--json"),
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 1
    assert json.loads(r.stdout)["error"]["code"] == "workers_need_postgresql"
    assert (data / "hub.db").read_bytes() == before
