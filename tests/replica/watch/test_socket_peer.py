"""The watcher socket's own defences (replica/watch/server.py), in-process: the peer's uid
(SO_PEERCRED), the request's size and shape, the allowlist. The command runner is a
recorder: a refused request must never reach it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from replica.cli.entry import ask
from replica.ipc import wire
from replica.watch.server import NotServed, SocketServer, check_peer
from tests.kit.host import as_anyone

SPACE = SimpleNamespace(space_id="sp_" + "a" * 26, name="t")


@pytest.fixture
def server() -> Iterator[tuple[SocketServer, list[list[str]]]]:
    # under /tmp itself (not pytest's 0700 folder): another uid must be able to reach it
    home = tempfile.mkdtemp(prefix="quire-sock-")
    calls: list[list[str]] = []

    def run(argv: list[str], served: Any = None) -> int:
        calls.append(argv)
        print("ran", argv)
        return 0

    s = SocketServer(Path(home), SPACE, syncer=None, run=run)
    assert s.start()
    yield s, calls
    s.stop()
    shutil.rmtree(home)


def _request(s: SocketServer, argv: list[str]) -> dict[str, Any]:
    return {"v": 1, "argv": argv, "home": s.home, "env": wire.env_of(os.environ)}


def test_check_peer_refuses_another_uid_with_a_fake_credential() -> None:
    check_peer(1000, uid=1000)
    for other in (0, 999, None):
        with pytest.raises(NotServed) as e:
            check_peer(other, uid=1000)
        assert e.value.code == "forbidden"


def test_the_socket_and_its_folder_are_this_users_only(server: Any) -> None:
    s, calls = server
    assert oct(os.stat(s.path).st_mode & 0o777) == "0o600"
    st = os.stat(os.path.dirname(s.path))
    assert oct(st.st_mode & 0o777) == "0o700" and st.st_uid == os.getuid()
    reply, why = ask(s.path, _request(s, ["status", "--json"]), 10)
    assert why == "" and reply is not None
    assert (reply["stdout"], reply["code"]) == ("ran ['status', '--json']\n", 0)
    assert calls == [["status", "--json"]]


@pytest.mark.skipif(os.getuid() != 0, reason="changing uid needs root")
def test_another_uid_is_refused_even_when_the_permissions_let_it_connect(server: Any) -> None:
    """The attack: the folder and socket loosened by mistake (0711, 0666); a process of
    another user (nobody) connects and asks for a status. SO_PEERCRED refuses it."""
    s, calls = server
    os.chmod(os.path.dirname(s.path), 0o711)
    os.chmod(os.path.dirname(os.path.dirname(s.path)), 0o711)
    os.chmod(s.path, 0o666)
    code = ("import json, socket, sys\n"
            "c = socket.socket(socket.AF_UNIX)\n"
            "c.connect(sys.argv[1])\n"
            "try:\n"
            "    c.sendall(sys.argv[2].encode() + b'\\n')\n"
            "except BrokenPipeError:\n"
            "    pass  # refused at once: the reply is already there\n"
            "print(c.makefile('rb').read().decode())\n")
    # the standard library only, and an interpreter outside the checkout: the clone may sit
    # in a home nobody else can enter
    p = subprocess.run([*as_anyone(code), s.path, json.dumps(_request(s, ["status"]))],
                       capture_output=True, text=True, user=65534, cwd="/", timeout=60)
    assert p.returncode == 0, p.stderr
    reply = json.loads(p.stdout)
    assert reply["served"] is False and reply["error"]["code"] == "forbidden"
    assert calls == []


@pytest.mark.parametrize(("raw", "code"), [
    (b"not json\n", "bad_request"),
    (b"[1, 2]\n", "bad_request"),
    (json.dumps({"v": 2, "argv": ["status"], "home": "/", "env": {}}).encode(),
     "bad_request"),
    (json.dumps({"v": 1, "argv": ["status", 3], "home": "/", "env": {}}).encode(),
     "bad_request"),
    (json.dumps({"v": 1, "argv": ["status"] * 65, "home": "/", "env": {}}).encode(),
     "bad_request"),
    (json.dumps({"v": 1, "argv": ["admin", "space", "create", "x"], "home": "/",
                 "env": {}}).encode(), "not_allowed"),
    (json.dumps({"v": 1, "argv": ["join", "http://h", "--invite", "c"], "home": "/",
                 "env": {}}).encode(), "not_allowed"),
    (None, "request_too_large"),
])
def test_bad_requests_get_a_documented_code_and_run_nothing(server: Any, raw: Any,
                                                           code: str) -> None:
    s, calls = server
    reply = s.answer(raw)
    assert reply == {"v": 1, "served": False,
                     "error": {"code": code, "message": wire.ERRORS[code]}}
    assert calls == []


def test_other_home_and_other_environment_are_not_served(server: Any) -> None:
    s, calls = server
    req = _request(s, ["status"])
    assert ask(s.path, dict(req, home="/tmp"), 10) == (None, "other_home")
    assert ask(s.path, dict(req, env=dict(req["env"], QUIRE_DELEGATION_TOKEN="t")), 10) == (
        None, "env_differs")
    too_big = dict(req, pad="x" * wire.MAX_REQUEST)
    assert ask(s.path, too_big, 10) == (None, "request_too_large")
    assert calls == []


def test_a_long_home_path_is_reached_through_its_folder(tmp_path: Path) -> None:
    home = tmp_path / ("h" * 120)
    s = SocketServer(home, SPACE, syncer=None, run=lambda argv, served=None: 7)
    assert len(os.fsencode(s.path)) > 107
    assert s.start()
    try:
        reply, why = ask(s.path, {"v": 1, "argv": ["sync"], "home": s.home,
                                  "env": wire.env_of(os.environ)}, 10)
        assert why == "" and reply is not None and reply["code"] == 7
    finally:
        s.stop()
    assert not os.path.exists(s.path)
