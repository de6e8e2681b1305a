"""The small daily things of issue 31 (item 9), each as a person meets it with the real CLI
and a real hub process. Before (0506cf5): the team lead's ``quire status`` pointed to an
invite; a remote read of a space not cloned here was ``not_joined``; a URL without a scheme
exited 4 and one ending in ``/v1`` exited 5 ("refused"); an unreachable hub printed the HTTP
client's text without the URL; ``quire … | head`` ended in a BrokenPipeError traceback and
exit 1; ``quire hub serve`` on a busy port printed "serving" first."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.kit.cli import QUIRE, FreshHub, qjson, quire
from tests.kit.host import REPO, free_port

pytestmark = [pytest.mark.e2e]


def test_team_lead_reads_a_space_not_cloned_here_and_status_names_the_join_that_works(
        hub: FreshHub, owner: Path) -> None:
    space = "lead-" + uuid.uuid4().hex[:6]
    qjson(owner, "admin", "space", "create", space)
    status = quire(owner, "status", check=False)
    assert status.returncode == 1
    assert f"quire join {hub.url} --space NAME" in status.stderr, status.stderr
    named = quire(owner, "status", space, check=False)
    assert f"quire join {hub.url} --space {space}" in named.stderr, named.stderr
    # the owner's machine reads and searches the space at the hub without cloning it
    found = qjson(owner, "search", "anything", "--remote", "--space", space)
    listed = qjson(owner, "admin", "--hub", hub.url + "/v1/", "space", "list")["spaces"]
    assert space in [s["name"] for s in listed]  # --hub as typed, with the API's /v1
    assert found["total"] == 0 and found["head"]["seq"] == 0
    people = qjson(owner, "read", "page/none", "--remote", "--space", space, check=False)
    assert people["error"]["code"] == "not_found"  # the hub answered: no such page


def test_hub_urls_as_people_type_them(hub: FreshHub, tmp_path: Path) -> None:
    home = tmp_path / "home"
    bare = hub.url.removeprefix("http://")
    p = quire(home, "join", bare, "--invite", "qi_x", "--json", check=False)
    err = json.loads(p.stdout)["error"]
    assert p.returncode == 1 and err["details"]["reason"] == "bad_url"
    assert f"http://{bare}" in err["message"]
    p = quire(home, "join", hub.url + "/console", "--invite", "qi_x", "--json", check=False)
    err = json.loads(p.stdout)["error"]
    assert p.returncode == 1 and err["details"]["reason"] == "not_a_hub", err
    dead = f"http://127.0.0.1:{free_port()}"
    p = quire(home, "join", dead, "--invite", "qi_x", check=False)
    assert p.returncode == 4, p.stderr
    assert f"could not reach the hub at {dead}" in p.stderr and "nothing local is lost" in p.stderr
    assert "Traceback" not in p.stderr
    assert not (home / "hubs").exists()  # nothing was changed


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes (quire … | head)
    try:
        p = subprocess.run([*QUIRE, "completion", "bash"], stdout=write,
                           stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=60,
                           env=dict(os.environ, QUIRE_HOME=str(tmp_path)))
    finally:
        os.close(write)
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_a_closed_pipe_ends_a_command_a_watcher_answers_quietly(tmp_path: Path) -> None:
    """The same through the watcher's socket (replica/cli/entry.py prints its reply)."""
    import tempfile
    from types import SimpleNamespace

    from replica.watch.server import SocketServer

    home = tempfile.mkdtemp(prefix="quire-pipe-")  # short: a socket path has a length cap
    server = SocketServer(Path(home), SimpleNamespace(space_id="sp_" + "a" * 26, name="t"),
                          syncer=None, run=lambda argv, served=None: print("x" * 100_000) or 0)
    assert server.start()
    read, write = os.pipe()
    os.close(read)
    try:
        p = subprocess.run([*QUIRE[:-1], "import sys; from replica.cli.entry import main; "
                                         "sys.exit(main())", "status"],
                           stdout=write, stderr=subprocess.PIPE, text=True, cwd=REPO,
                           timeout=60, env=dict(os.environ, QUIRE_HOME=home,
                                                QUIRE_WATCHER_SOCKET="require"))
    finally:
        os.close(write)
        server.stop()
        import shutil

        shutil.rmtree(home)
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_serve_reports_a_busy_port_before_anything_else(hub: FreshHub) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        p = quire(None, "hub", "serve", "--data", str(hub.data), "--port", str(port),
                  check=False, timeout=60)
    assert p.returncode == 1 and "serving" not in p.stdout
    assert f"127.0.0.1:{port}" in p.stderr and "--port" in p.stderr, p.stderr
