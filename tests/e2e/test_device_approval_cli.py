"""``quire devices approve CODE`` shows what it approves and asks first (the real CLI, a
real ``quire hub serve``).

Attack (issue 29): a stranger runs ``quire login`` naming their machine like the victim's
("owner") and sends the code ("please approve your machine's re-login"); the victim's
``quire devices approve CODE`` approved at once, showing nothing, and the stranger's machine
became a full device of the victim named "owner". Now the command shows the request (name
as requested and the distinct one it gets, address, local time, code) and asks; where
nobody can answer (no terminal, no ``--yes``) it refuses with exit 2 and approves nothing.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from replica.hubclient.client import HubClient
from replica.machine.home import Home
from tests.kit.cli import device_auth
from tests.kit.host import REPO
from tests.kit.hubproc import init_hub, serve_hub

QUIRE = [sys.executable, "-m", "replica.cli.main"]


def _env(home: Path) -> dict[str, str]:
    return dict(os.environ, QUIRE_HOME=str(home))


def q(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QUIRE, *args], capture_output=True, text=True, env=_env(home),
                          cwd=REPO, timeout=60)


def on_terminal(home: Path, args: list[str], answer: str) -> tuple[int, str]:
    """Run the CLI on a pseudo-terminal (stdin and stdout), answer its question."""
    master, slave = pty.openpty()
    p = subprocess.Popen([*QUIRE, *args], stdin=slave, stdout=slave, stderr=slave,
                         env=_env(home), cwd=REPO)
    os.close(slave)
    seen = b""
    answered = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not data:
                break
            seen += data
        if not answered and b"[y/N]" in seen:
            os.write(master, answer.encode() + b"\n")
            answered = True
        if p.poll() is not None and not ready:
            break
    p.wait(10)
    os.close(master)
    return p.returncode, seen.decode(errors="replace")


def test_approval_shows_the_request_asks_and_never_lends_a_name(tmp_path: Path) -> None:
    data = tmp_path / "hub"
    code = init_hub(data)
    hub = serve_hub(data, env={"QUIRE_HUB_DEVICE_CODE_INTERVAL": "1"})
    owner, stranger = tmp_path / "owner", tmp_path / "stranger"
    login: subprocess.Popen[str] | None = None
    try:
        assert q(owner, "join", hub.url, "--invite", code, "--device", "owner",
                 "--json").returncode == 0
        login = subprocess.Popen([*QUIRE, "login", hub.url, "--device", "owner", "--json",
                                  "--print-code", "--poll-fast"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=_env(stranger),
                                 cwd=REPO)
        assert login.stdout is not None
        user_code = json.loads(login.stdout.readline())["user_code"]

        # a script (no terminal) without --yes: refused, exit 2, nothing approved
        p = q(owner, "devices", "approve", user_code)
        assert p.returncode == 2, (p.stdout, p.stderr)
        assert "--yes" in p.stderr and "[usage]" in p.stderr
        assert '"reason": "confirmation_required"' in p.stderr

        # a person at a terminal sees the request and says no: nothing approved
        rc, screen = on_terminal(owner, ["devices", "approve", user_code], "n")
        assert rc == 1, screen
        assert user_code in screen and "'owner'" in screen and "'owner (2)'" in screen
        assert "requested from 127.0.0.1" in screen
        assert time.strftime("%Z") in screen  # the request's time, in local time
        assert "not approved" in screen

        # approved (--yes, as a script would after checking): the device is "owner (2)"
        p = q(owner, "devices", "approve", user_code, "--yes")
        assert p.returncode == 0, (p.stdout, p.stderr)
        assert "'owner (2)'" in p.stdout and "127.0.0.1" in p.stdout
        out, err = login.communicate(timeout=60)
        assert login.returncode == 0, err
        h = Home(owner).hubs()[0]
        with HubClient(h.url, auth=device_auth(h), hub_key=h.public_key) as c:
            devices = c.admin_get("/v1/devices", {})["devices"]
        assert sorted(d["name"] for d in devices) == ["owner", "owner (2)"]
        assert json.loads(out.splitlines()[-1])["device_id"] in {d["id"] for d in devices}
    finally:
        if login is not None and login.poll() is None:
            login.kill()
        hub.stop()
