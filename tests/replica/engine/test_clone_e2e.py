"""A clone big enough for the vault writer process (replica/engine/clone_writers.py), through the
real CLI against a real hub: killed while a chunk is in the writer's hands, then completed
by ``quire sync``; and the progress bar of a clone and of a pull of many pages, drawn on a
terminal only."""

from __future__ import annotations

import json
import os
import re
import sqlite3

import pytest

from replica.engine import clone_writers as vaultwriter
from replica.engine.clone import CHUNK
from replica.engine.crash import POINTS
from replica.vault import created as clonefiles
from shared.entry import Entry
from tests.kit.cli import QUIRE, CliMember, CliTeam, init_and_serve_hub, qjson, quire
from tests.kit.host import REPO, run_on_pty

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

N = max(vaultwriter.MIN_ENTRIES, 2 * CHUNK) + 37  # two full chunks and a part


@pytest.fixture(scope="module")
def big(hub, owner, tmp_path_factory) -> tuple[CliTeam, CliMember]:
    """A space holding N entries, published by member ``a``."""
    team = CliTeam(hub, owner, tmp_path_factory.mktemp("big"), f"big{os.getpid() % 10000}")
    a = team.member("a")
    for i in range(N):
        a.write(Entry(id=f"page/d{i % 7}/p{i:05d}", title=f"page {i}", body=f"body {i}\n",
                      tags=("t",), meta={"n": i}))
    a.sync(timeout=600)
    return team, a


def _join(team: CliTeam, name: str, env: dict[str, str] | None = None, **kw):
    home, vault = team.root / name / "home", team.root / name / "vault"
    p = quire(home, "join", team.hub.url, "--invite", team.invite(), "--vault", str(vault),
              "--device", name, "--json", env=env, timeout=600, **kw)
    return CliMember(team, name, home, vault), p


def test_clone_killed_with_a_chunk_in_the_writer_is_completed_by_sync(big):
    assert "mid_clone" in POINTS
    team, a = big
    b, p = _join(team, "b", env={"QUIRE_TEST_CRASH_AT": "mid_clone"}, check=False)
    assert p.returncode == -9, (p.stdout, p.stderr)
    # the store recorded nothing (one transaction); some files may be on disk already
    b.sync(timeout=600)
    assert b.files() == a.files() and len(b.files()) == N
    assert b.local_status()["store_digest"] == a.local_status()["store_digest"]
    assert not list(b.vault.rglob("*.quire-tmp"))
    assert not team.batches_by(a, b)  # the files found on disk were not published back
    assert qjson(b.home, "verify")["ok"] is True
    st = b.local_status()
    assert st["outbox"] == 0 and not st["conflicts"], st


def test_clone_killed_then_cut_by_a_power_loss_is_completed_by_sync(big):
    """As above, then what a power cut may leave of the unrecorded files (each of them the
    clone's own: replica/vault/created.py): a name missing, no data, half of it, zeros, a create
    that never finished. ``quire sync`` writes them again and publishes nothing."""
    team, a = big
    b, p = _join(team, "pb", env={"QUIRE_TEST_CRASH_AT": "mid_clone"}, check=False)
    assert p.returncode == -9, (p.stdout, p.stderr)
    (store,) = b.home.rglob("store.sqlite")
    con = sqlite3.connect(store)
    (mark,) = con.execute("SELECT value FROM meta WHERE key = ?", (clonefiles.MARK,)).fetchone()
    con.close()
    mtime = json.loads(mark)["mtime_ns"]  # what the clone's files carry once written
    # the first chunk's paths (whichever the writers had reached before the kill)
    made = [b.vault / "page" / f"d{i % 7}" / f"p{i:05d}.md" for i in range(5)]
    data = _page(a, 2)
    for path, shown in zip(made[1:], [b"", data[:40], b"\0" * len(data), data[:10]],
                           strict=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(shown)
        os.utime(path, ns=(mtime, mtime))  # the clone's mark reached the disk, not the data
    made[0].unlink(missing_ok=True)
    os.chmod(made[4], 0)  # and a create that never finished
    b.sync(timeout=600)
    assert b.files() == a.files() and len(b.files()) == N
    assert not team.batches_by(a, b)
    assert qjson(b.home, "verify")["ok"] is True
    st = b.local_status()
    assert st["outbox"] == 0 and not st["conflicts"], st


def _page(a: CliMember, i: int) -> bytes:
    return (a.vault / "page" / f"d{i % 7}" / f"p{i:05d}.md").read_bytes()


def _on_terminal(home, *args: str) -> tuple[int, str]:
    """Run quire with stderr on a pseudo-terminal (stdout a pipe); what stderr showed."""
    e = dict(os.environ, QUIRE_HOME=str(home), TERM="xterm-256color", COLUMNS="160")
    e.pop("QUIRE_TEST_CRASH_AT", None)
    code, out = run_on_pty([*QUIRE, *args], e, stream="stderr", cwd=REPO, timeout=600)
    text = out.decode(errors="replace")
    return code, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)  # colours, cursor


def test_clone_progress_shows_count_of_total_on_a_terminal_only(big):
    team, _a = big
    home = team.root / "c" / "home"
    code, shown = _on_terminal(home, "join", team.hub.url, "--invite", team.invite(),
                               "--vault", str(team.root / "c" / "vault"), "--device", "c")
    assert code == 0, shown
    assert re.search(rf"\b{CHUNK}/{N}\b", shown), shown  # count of the hub's total
    assert "ETA" in shown
    # piped, or with --json on a terminal: no bar
    _d, p = _join(team, "d")
    assert f"/{N}" not in p.stderr and "ETA" not in p.stderr
    code, shown = _on_terminal(team.root / "e" / "home", "join", team.hub.url, "--invite",
                               team.invite(), "--vault", str(team.root / "e" / "vault"),
                               "--device", "e", "--json")
    assert code == 0 and f"/{N}" not in shown and "ETA" not in shown, shown


def test_a_pull_of_many_pages_shows_batches_of_the_signed_total(tmp_path):
    """A member 9 batches behind a hub that serves 3 a page: its sync on a terminal shows
    how many of the 9 it has pulled; piped, nothing."""
    hub = init_and_serve_hub(tmp_path / "hub", env={"QUIRE_HUB_CHANGES_PAGE": "3"})
    try:
        owner = tmp_path / "owner"
        qjson(owner, "join", hub.url, "--invite", hub.enrollment_code, "--device", "owner")
        team = CliTeam(hub, owner, tmp_path, "pages")
        a, b = team.members("a", "b")
        for i in range(9):
            a.write(Entry(id=f"page/p{i}", title=f"p{i}", body=f"{i}\n"))
            a.sync()
        code, shown = _on_terminal(b.home, "sync")
        assert code == 0, shown
        assert re.search(r"\b[369]/9\b", shown), shown  # batches pulled of the head's 9
        assert len(b.files()) == 9
        a.write(Entry(id="page/p9", title="p9", body="9\n"))
        a.sync()
        p = b.run("sync")  # piped: no bar
        assert "/1" not in p.stderr and "ETA" not in p.stderr, p.stderr
    finally:
        hub.proc.terminate()
        hub.proc.wait(10)
