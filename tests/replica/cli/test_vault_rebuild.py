"""A lost or damaged vault is written again from the store (``quire vault rebuild``,
replica/app/rebuild.py; docs/replica.md "Rebuilding a vault"), byte for byte, never over a
local edit, and ``quire doctor``'s advice for each vault state is that command, run here
exactly as printed (a shell, ``QUIRE_HOME`` and ``quire`` on ``PATH``, as a person pastes
it). Before (0506cf5) doctor advised ``mkdir -p VAULT && quire sync NAME`` for a lost vault,
which failed with ``vault_missing`` (exit 1) and wrote nothing: the first test failed there.
Real hub process, the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from replica.machine.home import Home
from shared.entry import Entry
from tests.kit.cli import CliMember, CliTeam, quire

pytestmark = [pytest.mark.e2e]


def _doctor(m: CliMember) -> list[dict]:
    p = quire(m.home, "doctor", "--json", check=False)
    return [f for f in json.loads(p.stdout)["findings"] if f["check"] == "vault"]


def _run_as_printed(m: CliMember, command: str) -> subprocess.CompletedProcess[str]:
    """The fix as a person pastes it into a shell of this machine."""
    env = dict(os.environ, QUIRE_HOME=str(m.home),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    env.pop("QUIRE_TEST_CRASH_AT", None)
    return subprocess.run(command, shell=True, env=env, capture_output=True, text=True,
                          timeout=120)


def _member_with_pages(team: CliTeam, name: str, n: int = 4) -> tuple[CliMember, dict]:
    m = team.member(name)
    for i in range(n):
        m.write(Entry(id=f"page/p{i}", title=f"Page {i}", body=f"line {i}\nünïcode\n",
                      tags=("ops",) if i % 2 else ()))
    m.write(Entry(id="guardrail/no-force-push", title="No force push", body="never\n",
                  meta={"severity": "block"}))
    m.sync()
    return m, m.files()


def test_a_lost_or_emptied_vault_is_rebuilt_byte_for_byte_by_doctors_advice(
        team: CliTeam) -> None:
    a, before = _member_with_pages(team, "rb-lost")
    shutil.rmtree(a.vault)
    (f,) = _doctor(a)
    assert f["level"] == "error" and f["fix"] == f"quire vault rebuild {team.name}", f
    p = _run_as_printed(a, f["fix"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert a.files() == before  # every page, byte for byte
    assert (a.vault / ".quire-vault").is_file()
    assert not _doctor(a)
    doc = json.loads(quire(a.home, "sync", "--json").stdout)
    assert doc["sync"]["pushed"] == 0 and doc["state"] == "ok"  # nothing to publish
    # an emptied vault without its presence file (an empty mount point): the same advice
    for child in list(a.vault.iterdir()):  # the folder, nothing in it
        shutil.rmtree(child) if child.is_dir() else child.unlink()
    assert quire(a.home, "sync", check=False).returncode == 1  # vault_missing
    (f,) = _doctor(a)
    assert f["level"] == "error" and "vault_missing" in f["message"]
    assert _run_as_printed(a, f["fix"]).returncode == 0
    assert a.files() == before


def test_missing_pages_come_back_and_an_edited_one_is_never_overwritten(
        team: CliTeam) -> None:
    a, before = _member_with_pages(team, "rb-some")
    a.path("page/p0").unlink()
    a.path("page/p1").unlink()
    edited = b"---\ntitle: Page 2\n---\nmy unpublished edit\n"
    a.path("page/p2").write_bytes(edited)
    (f,) = [f for f in _doctor(a) if "gone from the vault" in f["message"]]
    assert f["level"] == "warn" and "page/p0" in f["message"]
    p = _run_as_printed(a, f["fix"])
    assert p.returncode == 3, p.stdout + p.stderr  # done, one file left as it is
    assert "kept as they are: 1 file(s)" in p.stdout and "page/p2" in p.stdout
    after = a.files()
    assert after["page/p2.md"] == edited  # the edit is kept
    assert {k: v for k, v in after.items() if k != "page/p2.md"} == {
        k: v for k, v in before.items() if k != "page/p2.md"}
    # --set-aside: the store's version written, the edit moved into a hidden folder
    doc = json.loads(quire(a.home, "vault", "rebuild", "--set-aside", "--json").stdout)
    assert {k: v for k, v in a.files().items() if not k.startswith(".")} == before
    aside = Path(doc["set_aside"]["folder"])
    assert (aside / "page" / "p2.md").read_bytes() == edited
    assert json.loads(quire(a.home, "sync", "--json").stdout)["sync"]["pushed"] == 0


@pytest.mark.skipif(not os.environ.get("QUIRE_LONG_E2E"),
                    reason="long variant (QUIRE_LONG_E2E=1); the watcher's re-arm is "
                           "tests/replica/watch/test_vault_gone_e2e.py")
def test_a_vault_rebuilt_under_a_running_watcher_is_watched_again(team: CliTeam) -> None:
    """The watcher's side of recovery (replica/watch/daemon.py): gone, rebuilt, back."""
    from tests.kit.watcher import DEADLINE, WatchProc, wait_for

    a, _ = _member_with_pages(team, "rb-watch", n=2)
    b = team.member("rb-other")
    w = WatchProc(a)
    try:
        w.wait_ready()
        shutil.rmtree(a.vault)
        wait_for(lambda: "the vault folder is gone" in w.log.read_text(), DEADLINE,
                 lambda: w.log.read_text()[-2000:])
        assert quire(a.home, "vault", "rebuild", team.name).returncode == 0
        wait_for(lambda: "the vault folder is back" in w.log.read_text()
                 and w.status().get("journal", {}).get("valid") is True, DEADLINE,
                 lambda: w.log.read_text()[-2000:])
        a.write(Entry(id="page/after", title="after", body="written after the rebuild\n"))
        wait_for(lambda: (b.sync(), (b.read("page/after") or Entry(id="page/after")).body
                          == "written after the rebuild\n")[1], DEADLINE,
                 lambda: w.log.read_text()[-2000:], step=0.5)
    finally:
        assert w.stop() == 0
    assert Home(a.home).spaces()[0].name == team.name
