"""End to end: real ``quire hub serve`` processes, machines joined with the real CLI, and
``quire watch`` daemons (one QUIRE_HOME each). Nobody runs ``quire sync``."""

from __future__ import annotations

import json
import os
import signal
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from replica.app.service import open_client as _client
from replica.machine.home import Home
from replica.watch.core import Backoff
from shared.entry import make_entry
from shared.signing import load_private, public_b64
from tests.kit.cli import CliMember, CliTeam, qjson, quire
from tests.kit.hubproc import HubProcess, init_hub, serve_hub
from tests.kit.pg import pg_database, require_pg
from tests.kit.watcher import DEADLINE, HUB_ENV, WATCH_ENV, WatchProc, wait_for

pytestmark = pytest.mark.e2e


@dataclass
class HubHandle:
    url: str
    data: Path
    procs: list[HubProcess]


def _serve(tmp: Path, db: str | None = None, n: int = 1, env: dict[str, str] | None = None
           ) -> tuple[HubHandle, Path]:
    data = tmp / "hub"
    code = init_hub(data, db)
    procs = [serve_hub(data, db=db, env={**HUB_ENV, **(env or {})}) for _ in range(n)]
    owner = tmp / "owner"
    qjson(owner, "join", procs[0].url, "--invite", code, "--device", "owner")
    return HubHandle(procs[0].url, data, procs), owner


def _team(h: HubHandle, owner: Path, root: Path) -> CliTeam:
    return CliTeam(h, owner, root, "w-" + uuid.uuid4().hex[:8])  # type: ignore[arg-type]


def _entry(eid: str, body: str) -> Any:
    return make_entry({"id": eid, "title": eid, "body": body})


def _has(m: CliMember, eid: str, body: str) -> bool:
    try:
        e = m.read(eid)
    except Exception:  # a file being replaced
        return False
    return e is not None and e.body == body


def test_an_edit_in_one_vault_reaches_the_other_two_without_any_command(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    team = _team(*shared_hub, tmp_path)
    members = team.members("ann", "bob", "cyd")
    watchers = [WatchProc(m) for m in members]
    try:
        for w in watchers:
            w.wait_ready()
        ann, bob, cyd = members
        ann.write(_entry("page/deploy", "ship it on fridays\n"))
        wait_for(lambda: _has(bob, "page/deploy", "ship it on fridays\n")
                 and _has(cyd, "page/deploy", "ship it on fridays\n"), DEADLINE,
                 lambda: f"not propagated: {[w.status() for w in watchers]}")
        # and back the other way, an edit on top of the first
        bob.write(_entry("page/deploy", "never ship on fridays\n"))
        wait_for(lambda: _has(ann, "page/deploy", "never ship on fridays\n")
                 and _has(cyd, "page/deploy", "never ship on fridays\n"), DEADLINE,
                 lambda: f"not propagated back: {[w.status() for w in watchers]}")

        def settled(s: dict[str, Any]) -> bool:
            return (s.get("state") == "idle" and (s.get("head") or {}).get("seq") == 2
                    and s.get("outbox") == 0 and s["lag"]["seq"] == 0)

        for w in watchers:
            wait_for(lambda w=w: settled(w.status()), DEADLINE, lambda w=w: str(w.status()))
    finally:
        codes = [w.stop() for w in watchers]
    assert codes == [0, 0, 0]
    # a clean stop says so in the status, and 'quire status' shows it
    st = qjson(members[0].home, "status")
    assert st["watcher"]["state"] == "stopped" and st["watcher"]["running"] is False


@pytest.fixture(scope="module")
def solo(shared_hub: tuple[HubHandle, Path], tmp_path_factory: pytest.TempPathFactory
         ) -> tuple[CliTeam, CliMember]:
    """One joined machine for the tests that need a space but no traffic."""
    team = _team(*shared_hub, tmp_path_factory.mktemp("solo"))
    (m,) = team.members("solo")
    return team, m


def test_a_second_watcher_for_a_space_exits_naming_the_holder(
        solo: tuple[CliTeam, CliMember]) -> None:
    _, m = solo
    first = WatchProc(m)
    try:
        first.wait_ready()
        second = quire(m.home, "watch", "--json", check=False, env=WATCH_ENV, timeout=30)
        assert second.returncode == 1
        err = json.loads(second.stdout)["error"]
        assert err["code"] == "lock_held"
        assert err["details"]["pid"] == first.proc.pid and err["details"]["started_at"]
        assert f"pid {first.proc.pid}" in err["message"]
        st = qjson(m.home, "status")
        assert st["watcher"]["running"] is True and st["watcher"]["pid"] == first.proc.pid
        human = quire(m.home, "status").stdout
        assert f"watcher: idle (pid {first.proc.pid}" in human
    finally:
        assert first.stop() == 0


def test_hub_killed_and_restarted_watchers_back_off_reconnect_and_lose_no_edit(
        tmp_path: Path) -> None:
    h, owner = _serve(tmp_path)
    team = _team(h, owner, tmp_path)
    members = team.members("ann", "bob", "cyd")
    watchers = [WatchProc(m) for m in members]
    port = h.procs[0].port
    try:
        for w in watchers:
            w.wait_ready()
        h.procs[0].stop(signal.SIGKILL)
        ann, bob, cyd = members
        ann.write(_entry("page/offline-a", "written while the hub was down\n"))
        bob.write(_entry("page/offline-b", "also written while down\n"))
        # both publishers fail, back off, and keep backing off while the hub is gone
        wait_for(lambda: all(len(w.status().get("backoff", {}).get("delays", [])) >= 3
                             for w in watchers[:2]), DEADLINE,
                 lambda: f"no backoff: {[w.status() for w in watchers]}")
        assert all(w.status()["state"] in ("backoff", "syncing") for w in watchers[:2])
        assert ann.read("page/offline-b") is None
        h.procs[0] = serve_hub(h.data, port=port, env=HUB_ENV)
        for eid, body in (("page/offline-a", "written while the hub was down\n"),
                          ("page/offline-b", "also written while down\n")):
            wait_for(lambda eid=eid, body=body: all(_has(m, eid, body) for m in members), DEADLINE,
                     lambda: f"not converged: {[w.status() for w in watchers]}")
        for w in watchers:
            w.wait_ready()
        # the delays the watchers slept match the configured pacing
        b = Backoff(int(WATCH_ENV["QUIRE_WATCH_BACKOFF_INITIAL_MS"]),
                    int(WATCH_ENV["QUIRE_WATCH_BACKOFF_MAX_MS"]),
                    float(WATCH_ENV["QUIRE_WATCH_BACKOFF_JITTER"]))
        for w in watchers:
            s = w.status()
            delays = s["backoff"]["delays"]
            assert s["backoff"]["attempt"] == 0 and s["last_error"] is None  # reset
            assert delays, s
            for attempt, ms in delays:
                lo, hi = b.bounds(attempt)
                assert lo <= ms <= hi <= b.max_ms, (attempt, ms)
            attempts = [a for a, _ in delays]
            assert attempts == list(range(len(attempts))), attempts  # one episode, paced
    finally:
        codes = [w.stop() for w in watchers]
        for p in h.procs:
            p.stop()
    assert codes == [0, 0, 0]


def test_removed_member_is_suspended_keeps_its_edit_and_resumes_when_invited_back(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    team = _team(*shared_hub, tmp_path)
    ann, bob = team.members("ann", "bob")
    wa, wb = WatchProc(ann), WatchProc(bob)
    try:
        wa.wait_ready(), wb.wait_ready()
        bob_user = Home(bob.home).hubs()[0].user_id
        owner_hub = Home(team.owner).hubs()[0]
        with _client(owner_hub) as c:  # the admin API (identity work): remove bob
            c._request("POST", f"/v1/spaces/{team.space['id']}/members/{bob_user}/remove", {})
        s = wait_for(lambda: wb.status() if wb.status().get("state") == "suspended" else None,
                     DEADLINE, lambda: f"not suspended: {wb.status()}")
        assert s["last_error"]["code"] == "not_found"
        bob.write(_entry("page/while-out", "kept while suspended\n"))
        ann.write(_entry("page/news", "bob cannot see this yet\n"))
        wait_for(lambda: wa.status().get("head", {}).get("seq") == 1)
        # two of bob's suspended retries refused after ann's publication landed (each
        # stamps last_error.at; the second one started after the first was seen): had
        # either pulled, page/news would be in bob's vault now
        refusals = [wb.status()["last_error"]["at"]]
        for _ in range(2):
            wait_for(lambda: (wb.status().get("last_error") or {}).get("at", refusals[-1])
                     != refusals[-1], DEADLINE, lambda: f"no retry: {wb.status()}")
            refusals.append(wb.status()["last_error"]["at"])
        assert wb.status()["state"] == "suspended"
        assert wb.status()["last_error"]["code"] == "not_found"
        assert bob.read("page/news") is None and _has(bob, "page/while-out",
                                                      "kept while suspended\n")
        # invited back: the same device redeems a new invite
        code = team.invite("editor")
        bob_hub = Home(bob.home).hubs()[0]
        with _client(bob_hub) as c:
            c.redeem(code, "bob", public_b64(load_private(bob_hub.key_path)))
        for eid, body in (("page/news", "bob cannot see this yet\n"),
                          ("page/while-out", "kept while suspended\n")):
            wait_for(lambda eid=eid, body=body: _has(ann, eid, body) and _has(bob, eid, body),
                     DEADLINE, lambda: f"not resumed: {wb.status()}")
        wb.wait_ready()
    finally:
        assert [wa.stop(), wb.stop()] == [0, 0]


@pytest.mark.pg
def test_watchers_on_two_hub_processes_converge(tmp_path: Path) -> None:
    require_pg()
    with pg_database() as db:
        # two processes behind one public URL (what a proxy gives them)
        h, owner = _serve(tmp_path, db=db, n=2,
                          env={"QUIRE_HUB_PUBLIC_URL": "http://quire.test"})
        try:
            team = _team(h, owner, tmp_path)
            ann, bob = team.members("ann", "bob")  # both joined through process 0
            team.hub = HubHandle(h.procs[1].url, h.data, h.procs)  # type: ignore[assignment]
            (cyd,) = team.members("cyd")  # joined through process 1
            watchers = [WatchProc(m) for m in (ann, bob, cyd)]
            try:
                for w in watchers:
                    w.wait_ready()
                assert Home(cyd.home).hubs()[0].url == h.procs[1].url
                cyd.write(_entry("page/from-b", "published on process 1\n"))
                wait_for(lambda: all(_has(m, "page/from-b", "published on process 1\n")
                                     for m in (ann, bob)), DEADLINE,
                         lambda: f"{[w.status() for w in watchers]}")
                ann.write(_entry("page/from-a", "published on process 0\n"))
                wait_for(lambda: all(_has(m, "page/from-a", "published on process 0\n")
                                     for m in (bob, cyd)), DEADLINE,
                         lambda: f"{[w.status() for w in watchers]}")
            finally:
                assert [w.stop() for w in watchers] == [0, 0, 0]
        finally:
            for p in h.procs:
                p.stop()


def test_install_writes_a_user_unit_for_this_machine_and_uninstall_removes_it(
        solo: tuple[CliTeam, CliMember], tmp_path: Path) -> None:
    team, m = solo
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    res = qjson(m.home, "watch", "--install", env=env)
    unit = Path(res["unit"])
    assert unit == tmp_path / "config" / "systemd" / "user" / "quire-watch@.service"
    text = unit.read_text()
    assert f"Environment=QUIRE_HOME={m.home.resolve()}" in text
    assert " watch %i" in text and "ExecStart=" in text
    assert res["commands"][-1] == f"systemctl --user enable --now quire-watch@{team.name}"
    res = qjson(m.home, "watch", "--uninstall", env=env)
    assert res["removed"] is True and not unit.exists()
    assert os.environ.get("XDG_CONFIG_HOME") != env["XDG_CONFIG_HOME"]
