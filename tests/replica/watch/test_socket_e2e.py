"""``quire status``/``sync`` served by a running watcher over its socket (issue 16;
replica/cli/entry.py, replica/watch/server.py), end to end: a real hub process, machines joined
with the real CLI, a real ``quire watch`` process, and ``quire`` commands through the
console script's entry (``replica.cli.entry``), with ``QUIRE_WATCHER_SOCKET=require`` (fail
unless served) or ``=off`` (always local) to know which path ran."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from replica.cli.entry import ask
from replica.ipc import wire
from replica.machine.home import Home
from shared.entry import make_entry
from tests.kit.cli import CliMember, CliTeam, qjson
from tests.kit.host import REPO
from tests.kit.watcher import WatchProc, wait_for
from tests.replica.watch.test_watch_e2e import HubHandle

pytestmark = pytest.mark.e2e

ENTRY = [sys.executable, "-c", "import sys; from replica.cli.entry import main; sys.exit(main())"]


def q(m: CliMember, *args: str, mode: str, env: dict[str, str] | None = None
      ) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ, QUIRE_HOME=str(m.home), **{wire.ENV_SWITCH: mode}, **(env or {}))
    e.pop("QUIRE_TEST_CRASH_AT", None)
    return subprocess.run([*ENTRY, *args], capture_output=True, text=True, env=e, cwd=REPO,
                          timeout=120)


def _member(shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> CliMember:
    h, owner = shared_hub
    team = CliTeam(h, owner, tmp_path, "sock-" + uuid.uuid4().hex[:8])  # type: ignore[arg-type]
    m = team.member("sam")
    m.write(make_entry({"id": "page/one", "title": "one", "body": "first\n"}))
    m.sync()
    return m


def _sock(m: CliMember) -> str:
    return wire.socket_path(os.path.abspath(m.home), Home(m.home).spaces()[0].space_id)


def _request(m: CliMember, argv: list[str]) -> dict[str, Any]:
    return {"v": 1, "argv": argv, "home": os.path.abspath(m.home),
            "env": wire.env_of(dict(os.environ, QUIRE_HOME=str(m.home)))}


def _steady(doc: dict[str, Any]) -> dict[str, Any]:
    """A status without what changes by itself between two reads while a watcher runs:
    every scanning status leaves a journal cookie the watcher records, and a sync's time."""
    w = dict(doc.get("watcher") or {})
    for k in ("journal", "updated_at"):
        w.pop(k, None)
    out = {k: v for k, v in dict(doc, watcher=w).items()
           if k not in ("last_sync", "last_success")}
    if "sync" in out:  # a served sync scans by the watcher's journal, a local one walks
        out["sync"] = {k: v for k, v in out["sync"].items() if k != "scanned_by"}
    return out


def test_served_status_and_sync_print_what_local_ones_print(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    m = _member(shared_hub, tmp_path)
    w = WatchProc(m)
    try:
        w.wait_ready()
        st = os.stat(_sock(m))
        assert oct(st.st_mode & 0o777) == "0o600"
        assert oct(os.stat(os.path.dirname(_sock(m))).st_mode & 0o777) == "0o700"
        # the same state prints the same bytes. The watcher may change its own state between
        # two commands (a dropped event stream on a loaded machine, then a poll): each
        # comparison is retried until one pair ran on the same state
        def same(*args: str, norm: Any = None) -> tuple[Any, Any]:
            def pair() -> bool:
                got[:] = [q(m, *args, mode=md) for md in ("require", "off")]
                s_, l_ = got
                if norm is None:
                    return (s_.returncode, s_.stdout, s_.stderr) == (
                        l_.returncode, l_.stdout, l_.stderr)
                return s_.returncode == l_.returncode and norm(s_.stdout) == norm(l_.stdout)
            got: list[Any] = []
            wait_for(pair, why=lambda: f"served and local differ: {got}")
            return got[0], got[1]

        same("status", "--json", "--fast")  # no journal read: byte for byte
        served, _ = same("status", "--json", norm=lambda t: _steady(json.loads(t)))
        assert served.returncode == 0 and json.loads(served.stdout)["scanned"] is True
        # an error prints the same: a space this home has not joined
        served, _ = same("status", "nope")
        assert served.returncode != 0 and served.stderr.startswith("error: "), served
        # a no-op sync: the same report; the human line byte for byte
        served, _ = same("sync")
        assert served.stdout.startswith("synced "), served
        same("sync", "--json", norm=lambda t: _steady(json.loads(t)))
        # another QUIRE_* environment (provenance, a delegation token): not served, and
        # the command still works here
        refused = q(m, "status", "--json", mode="require", env={"QUIRE_AGENT": "x"})
        assert refused.returncode == 1 and "env_differs" in refused.stderr, refused
        assert q(m, "status", "--json", mode="", env={"QUIRE_AGENT": "x"}).returncode == 0
    finally:
        assert w.stop() == 0
    assert not os.path.exists(_sock(m))  # removed on a clean stop


def test_a_local_edit_is_published_by_a_served_sync(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    m = _member(shared_hub, tmp_path)
    # the watcher itself would publish the edit after its debounce: make that 10 minutes,
    # so only the served sync can
    w = WatchProc(m, env={"QUIRE_WATCH_DEBOUNCE_MS": "600000"})
    try:
        w.wait_ready()
        m.write(make_entry({"id": "page/two", "title": "two", "body": "made offline\n"}))
        p = q(m, "sync", "--json", mode="require")
        assert p.returncode == 0, p
        doc = json.loads(p.stdout)
        assert doc["sync"]["pushed"] == 1 and doc["state"] == "ok", doc
        # the hub has it: a second member's snapshot holds the page
        other = m.team.member("kim")
        assert other.read("page/two") is not None
    finally:
        w.stop()


def test_a_killed_watchers_socket_is_stale_and_the_command_runs_here(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    m = _member(shared_hub, tmp_path)
    w = WatchProc(m)
    w.wait_ready()
    assert q(m, "status", "--json", "--fast", mode="require").returncode == 0
    w.proc.send_signal(signal.SIGKILL)
    w.proc.wait(30)
    w.stop()
    assert os.path.exists(_sock(m))  # left behind: connecting is refused
    reply, why = ask(_sock(m), _request(m, ["status"]), 5)
    assert reply is None and "ConnectionRefused" in why
    required = q(m, "status", "--json", mode="require")
    assert required.returncode == 1 and "ConnectionRefused" in required.stderr
    p = q(m, "status", "--json", mode="")  # the default: silently run here
    assert p.returncode == 0 and p.stderr == "", p
    assert json.loads(p.stdout)["state"] == "ok"
    p = q(m, "sync", mode="")
    assert p.returncode == 0 and p.stdout.startswith("synced "), p
    # a new watcher replaces the stale file and serves again
    w2 = WatchProc(m)
    try:
        w2.wait_ready()
        wait_for(lambda: q(m, "status", "--json", "--fast", mode="require").returncode == 0)
    finally:
        w2.stop()


def test_requests_outside_the_allowlist_are_refused_and_change_nothing(
        shared_hub: tuple[HubHandle, Path], tmp_path: Path) -> None:
    """The attack: whatever can reach the socket asks the watcher (which holds the device
    key) to run an admin command or a join; it is refused before any parsing, and the
    hub has no such space afterwards."""
    h, owner = shared_hub
    m = _member(shared_hub, tmp_path)
    w = WatchProc(m)
    try:
        w.wait_ready()
        evil = "evil-" + uuid.uuid4().hex[:6]
        for argv, code in ((["admin", "space", "create", evil], "not_allowed"),
                           (["--json", "join", h.url, "--invite", "qi_x"], "not_allowed"),
                           (["delegate", "create"], "not_allowed"),
                           (["status", "--help"], "not_served")):
            reply, why = ask(_sock(m), _request(m, argv), 30)
            assert (reply, why) == (None, code), argv
        bad = dict(_request(m, ["status"]), home="/elsewhere")
        assert ask(_sock(m), bad, 30) == (None, "other_home")
        assert ask(_sock(m), dict(_request(m, ["status"]), argv="status"), 30) == (
            None, "bad_request")
        huge = dict(_request(m, ["status"]), pad="x" * (wire.MAX_REQUEST + 1))
        assert ask(_sock(m), huge, 30) == (None, "request_too_large")
        names = [s["name"] for s in qjson(owner, "admin", "space", "list")["spaces"]]
        assert evil not in names
        # and the watcher still serves
        assert q(m, "status", "--json", "--fast", mode="require").returncode == 0
    finally:
        assert w.stop() == 0
