"""``quire import`` and ``quire export`` with the real CLI and a real hub process: the dry
run publishes nothing, an import killed on progress (SIGKILL right after its first batch
is recorded: QUIRE_TEST_IMPORT_KILL_AFTER) resumes with no duplicate and nothing missing,
and a second member's clone is byte-identical to the source folder, ignored files left out
(``diff -r``). With QUIRE_LONG_E2E=1 the same runs on the full corpus (2,000 notes, 300
attachments: the Done-when of D132's import)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.kit import corpus
from tests.kit.cli import qjson, quire

pytestmark = pytest.mark.e2e

LONG = bool(os.environ.get("QUIRE_LONG_E2E"))


def _puts(team, via) -> Counter[str]:  # type: ignore[no-untyped-def]
    return Counter(op["entry"]["id"] for b in team.batches(via) for op in b["ops"])


@pytest.mark.parametrize("size", [pytest.param((2000, 300, 25, None), id="full",
                                               marks=pytest.mark.skipif(
                                                   not LONG, reason="QUIRE_LONG_E2E=1")),
                                  pytest.param((20, 3, 3, "12"), id="small")])
def test_import_killed_on_progress_resumes_and_a_clone_has_the_files(
        team, tmp_path: Path, size: tuple[int, int, int, str | None]) -> None:  # type: ignore[no-untyped-def]
    notes, attachments, big_every, per_batch = size
    src = tmp_path / "My Vault"
    corpus.build(src, notes=notes, attachments=attachments, big_every=big_every)
    want = corpus.files(src)
    alice = team.member("alice")
    env = {"QUIRE_TEST_IMPORT_BATCH_FILES": per_batch} if per_batch else {}

    dry = qjson(alice.home, "import", str(src), "--dry-run", env=env)
    assert dry["dry_run"] and dry["refused"] == [] and len(dry["imported"]) == len(want)
    assert dry["attachments"] == attachments
    assert _puts(team, alice) == Counter()

    p = quire(alice.home, "import", str(src), "--json", check=False, timeout=1800,
              env=dict(env, QUIRE_TEST_IMPORT_KILL_AFTER="1"))
    assert p.returncode == -9, p  # killed right after its first batch was recorded
    first = _puts(team, alice)
    assert 0 < len(first) < len(want)

    human = quire(alice.home, "import", str(src), env=env, timeout=1800).stdout
    assert (f"imported into {team.name} from {src}: {len(want) - len(first)} file(s), "
            f"{len(want) - len(first)} published") in human, human
    assert f"; {len(first)} imported before" in human and "not published" not in human
    puts = _puts(team, alice)
    assert set(puts) == {k.removesuffix(".md") for k in want}  # nothing missing
    assert max(puts.values()) == 1  # no duplicate

    bob = team.member("bob")  # joins: his clone
    got = corpus.files(bob.vault)
    assert set(got) == set(want)
    assert got == want  # byte for byte: CRLF, BOM, front matter styles, attachments
    tree = tmp_path / "source without ignored files"
    shutil.copytree(src, tree, ignore=shutil.ignore_patterns(
        ".*", "#*#", "*___jb_tmp___", "Thumbs.db", "private"))
    d = subprocess.run(["diff", "-r", "-x", ".quire*", str(tree), str(bob.vault)],
                       capture_output=True, text=True)
    assert d.returncode == 0, d.stdout[:2000]
