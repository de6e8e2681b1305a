"""A real ``quire witness serve`` process, a real ``quire hub serve`` and the real ``quire``
CLI: what ``quire sync`` accepts is co-signed by the witness over loopback, and a sync whose
checkpoint no witness co-signs is refused with nothing lost (docs/security.md, "The log and
its witnesses"). Long (three kinds of process): ``QUIRE_LONG_E2E=1``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from replica.hubclient.client import HubClient
from replica.machine.home import Home
from shared import tlog
from shared.entry import Entry
from shared.errors import QuireError
from tests.kit.cli import CliTeam, device_auth, quire

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    not os.environ.get("QUIRE_LONG_E2E"), reason="three kinds of process: QUIRE_LONG_E2E=1")]

ENTRY = [sys.executable, "-c", "import sys; from replica.cli.entry import main; sys.exit(main())"]
PAGE = Entry(id="page/deploy", title="Deploy", body="ship it\n")
EDIT = Entry(id="page/deploy", title="Deploy", body="ship it twice\n")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_quire_sync_takes_only_what_a_real_witness_co_signed(team: CliTeam, tmp_path: Path
                                                             ) -> None:
    port = _port()
    proc = subprocess.Popen([*ENTRY, "witness", "serve", "--data", str(tmp_path / "w"),
                             "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        me = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
        deadline = time.monotonic() + 30
        while True:  # poll until it answers
            try:
                if httpx2.get(me["url"] + "/", timeout=2).json()["key"] == me["key"]:
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline, "the witness did not start"
            time.sleep(0.1)
        a, b = team.members("a", "b")
        # the owner lists the witness (quire witness add, through the entry point)
        env = dict(os.environ, QUIRE_HOME=str(team.owner))
        set_ = subprocess.run([*ENTRY, "witness", "add", "--quorum", "1", "--json", "--",
                               team.space["name"], me["name"], me["key"], me["url"]],
                              capture_output=True, text=True, env=env, timeout=60)
        assert set_.returncode == 0, set_.stdout + set_.stderr
        assert json.loads(set_.stdout)["policy"]["quorum"] == 1
        h = Home(a.home).hubs()[0]  # an editor is not a hub owner: refused
        with HubClient(h.url, auth=device_auth(h), hub_key=h.public_key) as editor:
            with pytest.raises(QuireError):
                editor.admin_post(f"/v1/spaces/{team.space['id']}/witnesses",
                                  {"quorum": 0, "witnesses": []})
        a.write(PAGE)
        a.sync()
        b.sync()
        a.sync()  # a has seen the log with its own batch, co-signed
        assert b.read(PAGE.id) == PAGE
        with b.client() as c:
            head = c.head(team.space["id"])
        origin = tlog.parse_checkpoint(tlog.parse_note(head["checkpoint"]).body).origin
        held = httpx2.get(me["url"] + "/checkpoint", params={"origin": origin}).json()
        note = tlog.parse_note(held["note"])
        assert tlog.cosigned_by(note, me["name"], me["key"]) is not None
        # the witness goes away: a checkpoint nobody co-signs is not taken, nothing is lost
        proc.terminate()
        proc.wait(10)
        a.write(EDIT)
        a.sync()
        out = quire(b.home, "sync", "--json", check=False)
        assert out.returncode == 6, out.stdout + out.stderr
        err = json.loads(out.stdout.strip().splitlines()[-1])["error"]
        assert err["details"]["reason"] == "witness_quorum", err
        assert b.read(PAGE.id) == PAGE
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
