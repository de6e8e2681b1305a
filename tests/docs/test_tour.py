"""The README's tour runs as written (tests/docs/tour.py): every step exits 0 and prints what
the README shows. Real hub process, real CLI, a fresh home; only printed codes are filled in."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.tour import matches, parse
from tests.kit.host import free_port

REPO = Path(__file__).resolve().parents[2]
TOUR = "## A short tour"

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _netns() -> bool:
    """Can this machine give the tour a private network (so port 8470 is free)?"""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    ok = subprocess.run(["unshare", "-rn", "ip", "link", "set", "lo", "up"],
                        capture_output=True)
    return ok.returncode == 0


def run_tour(readme: Path, *, netns: bool | None = None) -> dict:
    cmd = [sys.executable, "-m", "tests.docs.tour", str(readme), TOUR]
    env = dict(os.environ)
    if _netns() if netns is None else netns:
        cmd = ["unshare", "-rn", "env", "QUIRE_TOUR_NETNS=1", *cmd]
    else:  # no namespaces here: the same tour on a free port instead of 8470
        port = free_port()
        cmd.append(json.dumps({
            "127.0.0.1:8470": f"127.0.0.1:{port}",
            "serve --data ./hubdata": f"serve --data ./hubdata --port {port}",
            "serve --data hubdata": f"serve --data hubdata --port {port}",
        }))
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _explain(report: dict) -> str:
    bad = report["run"][-1]
    return (f"README line {bad['line']}: {bad['command']}\nexit {bad.get('rc')}\n"
            f"--- printed\n{bad.get('output')}\n--- README shows\n"
            + "\n".join(bad.get("shown") or []))


ULID = re.compile(r"\b[0-9a-hjkmnp-tv-z]{26}\b")  # an id (shared/ids.py), in any case


def test_readme_tour_runs_as_written() -> None:
    report = run_tour(REPO / "README.md")
    assert report["ok"], _explain(report)
    assert len(report["run"]) == report["steps"] >= 15
    # people read names, never ids (issue 31): no id in any step's human output
    shown = {r["line"]: ULID.findall(str(r.get("output") or "").lower())
             for r in report["run"]}
    assert not any(shown.values()), {line: ids for line, ids in shown.items() if ids}


def test_readme_tour_runs_on_another_port_without_network_namespaces() -> None:
    report = run_tour(REPO / "README.md", netns=False)
    assert report["ok"], _explain(report)


def test_readme_tour_fails_on_a_wrong_command(tmp_path: Path) -> None:
    text = (REPO / "README.md").read_text()
    wrong = text.replace("$ quire admin space create team-memory",
                         "$ quire admin spaces create team-memory", 1)
    assert wrong != text
    (tmp_path / "README.md").write_text(wrong)
    report = run_tour(tmp_path / "README.md")
    assert not report["ok"]
    last = report["run"][-1]
    assert "spaces create" in last["command"] and last["rc"] == 2


def test_shown_output_is_matched_line_by_line_with_ellipses() -> None:
    shown = ["synced team-memory: pulled … batch(es)", "…", "state: ok"]
    assert matches(shown, "synced team-memory: pulled 1 batch(es)\n\na\nb\nstate: ok\n")
    assert matches(shown, "synced team-memory: pulled 0 batch(es)\nstate: ok\n")
    assert not matches(shown, "synced team-memory: pulled 1 batch(es)\nstate: error\n")
    assert not matches(["created space x"], "created space x\nand more\n")


def test_the_tour_is_found_and_uses_two_homes_on_one_machine() -> None:
    steps = parse((REPO / "README.md").read_text(), TOUR)
    cmds = [s.command for s in steps]
    assert any(c.startswith("quire hub serve") and s.background for c, s in zip(cmds, steps, strict=True))
    assert sum(c.startswith("export QUIRE_HOME=") for c in cmds) >= 2


def test_join_help_gives_the_two_replicas_on_one_machine_recipe(capsys) -> None:
    from replica.cli.main import main

    with pytest.raises(SystemExit):
        main(["join", "--help"])
    text = capsys.readouterr().out
    assert "export QUIRE_HOME=$PWD/alice" in text and "export QUIRE_HOME=$PWD/bob" in text
