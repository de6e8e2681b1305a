"""``quire doctor`` finds and explains what is wrong with a machine's setup: a key file others
can read, a watcher that died, a vault edited while the store was moved away, a hub that
signs with another key than the pinned one. Real hub processes, the real CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from replica.machine.home import Home
from shared.entry import Entry
from tests.kit.cli import QUIRE, CliTeam, init_and_serve_hub, qjson, quire
from tests.kit.host import REPO
from tests.kit.hubproc import init_hub, serve_hub

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def doctor(home: Path) -> tuple[int, dict]:
    p = quire(home, "doctor", "--json", check=False)
    assert p.returncode in (0, 3), p.stderr
    return p.returncode, json.loads(p.stdout)


def found(doc: dict, check: str) -> list[dict]:
    return [f for f in doc["findings"] if f["check"] == check]


def test_a_healthy_replica_has_nothing_to_fix_but_a_note_about_the_watcher(team: CliTeam):
    a = team.member("doc-ok")
    rc, doc = doctor(a.home)
    assert rc == 0 and doc["ok"], doc
    assert {f["check"] for f in doc["findings"]} <= {"watcher"}
    checks = {c["check"] for c in doc["checks"]}
    assert {"permissions", "hub", "space", "watcher", "disk"} <= checks


def test_a_device_key_readable_by_others_is_found_with_the_chmod_that_fixes_it(team: CliTeam):
    a = team.member("doc-perm")
    key = Home(a.home).hubs()[0].key_path
    os.chmod(key, 0o644)
    rc, doc = doctor(a.home)
    (f,) = found(doc, "permissions")
    assert rc == 3 and f["level"] == "error" and "0644" in f["message"]
    assert f["fix"] == f"chmod 600 {key}"
    subprocess.run(f["fix"], shell=True, check=True)  # the fix, pasted, fixes it
    assert not found(doctor(a.home)[1], "permissions")


def _open_to_others(root: Path) -> list[str]:
    out = []
    for folder, _dirs, files in os.walk(root):
        for p in [Path(folder), *(Path(folder) / f for f in files)]:
            if p.lstat().st_mode & 0o077:
                out.append(f"{oct(p.lstat().st_mode & 0o777)} {p.relative_to(root)}")
    return out


def test_a_replica_home_is_private_whatever_the_umask_and_doctor_finds_one_that_is_not(
        team: CliTeam):
    # a permissive umask: before, the home's folders were 0777 and its stores, status
    # files and claims 0666 (0755 and 0644 under the common 022), readable by anyone here
    old = os.umask(0)
    try:
        a = team.member("doc-umask")
        a.write(Entry(id="page/secret-plan", title="Plan", body="not for other users\n"))
        a.sync()
        a.run("conflicts", "list", "--json", check=False)  # opens the desk's claims
    finally:
        os.umask(old)
    assert _open_to_others(a.home) == []
    names = {p.name for p in a.home.rglob("*")}
    assert {"store.sqlite", "status.json", "space.json", "hub.json", "credential",
            "claims.sqlite"} <= names, names
    assert not found(doctor(a.home)[1], "permissions")
    # a home made by an older release (or copied with cp -r): found, and the fix works
    store = Home(a.home).spaces()[0].store_path
    os.chmod(store, 0o644)
    os.chmod(a.home, 0o755)
    rc, doc = doctor(a.home)
    (f,) = found(doc, "permissions")
    assert rc == 3 and f["level"] == "error" and "store.sqlite" in f["message"], f
    subprocess.run(f["fix"], shell=True, check=True)  # the fix, pasted, fixes it
    assert _open_to_others(a.home) == []
    assert not found(doctor(a.home)[1], "permissions")


def test_a_watcher_that_died_is_found(team: CliTeam):
    a = team.member("doc-watch")
    env = dict(os.environ, QUIRE_HOME=str(a.home))
    w = subprocess.Popen([*QUIRE, "watch"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            st = qjson(a.home, "status")
            if (st.get("watcher") or {}).get("running"):
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the watcher never said it runs")
        assert not [f for f in found(doctor(a.home)[1], "watcher") if f["level"] == "warn"]
    finally:
        os.killpg(w.pid, signal.SIGKILL)  # dies without a word
        w.wait()
    rc, doc = doctor(a.home)
    (f,) = [f for f in found(doc, "watcher") if "not running" in f["message"]]
    assert rc == 3 and f["level"] == "warn" and "quire watch" in f["fix"]


def test_a_vault_edit_made_while_the_store_was_moved_away_is_found(team: CliTeam):
    a = team.member("doc-store")
    a.write(Entry(id="page/kept", title="Kept", body="one\n"))
    a.sync()
    space = Home(a.home).spaces()[0]
    aside = space.store_path.with_name("store.moved")
    space.store_path.rename(aside)
    a.write(Entry(id="page/kept", title="Kept", body="one\ntwo\n"))  # edited meanwhile
    rc, doc = doctor(a.home)
    (f,) = found(doc, "store")
    assert rc == 3 and f["level"] == "error" and "not at" in f["message"]
    assert str(space.store_path) in f["fix"]
    assert not space.store_path.exists()  # doctor never creates a store
    aside.rename(space.store_path)  # the fix: move it back
    rc, doc = doctor(a.home)
    assert not found(doc, "store")
    (v,) = found(doc, "vault")
    assert "page/kept" in v["message"] and "not published yet" in v["message"]
    assert v["fix"].startswith(f"quire sync {team.name}")
    a.sync()
    assert not found(doctor(a.home)[1], "vault")


def test_a_hub_with_another_key_than_the_pinned_one_is_found(tmp_path: Path):
    first = init_and_serve_hub(tmp_path / "first")
    home = tmp_path / "owner"
    qjson(home, "join", first.url, "--invite", first.enrollment_code, "--device", "o")
    assert not found(doctor(home)[1], "hub_key")
    first.proc.terminate()
    first.proc.wait(10)
    # another hub (its own key) now answers at the same URL
    init_hub(tmp_path / "other")
    other = serve_hub(tmp_path / "other", port=int(first.url.rsplit(":", 1)[1]))
    try:
        rc, doc = doctor(home)
        (f,) = found(doc, "hub_key")
        assert rc == 3 and f["level"] == "error" and "pinned" in f["message"]
        assert "do not sync" in f["fix"]
    finally:
        other.stop()
    rc, doc = doctor(home)  # and with nothing answering there
    (f,) = found(doc, "hub")
    assert "does not answer" in f["message"] and first.url in f["fix"]
