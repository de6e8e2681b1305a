"""The README's performance tables are written from a results file, between markers only."""

from __future__ import annotations

import json
from pathlib import Path

from bench import readme


def _doc() -> dict:
    return {"mode": "full", "elapsed_s": 12.3, "commit": "abc1234",
            "config": {"clients": 16},
            "machine": {"cpu": "Test CPU", "cores": 2, "memory_mb": 4096, "python": "3.11",
                        "git": "git 2", "node": "v20", "load_avg_at_start": [0.1, 0.2, 0.3]},
            "results": [{"scenario": "clone", "size": 100, "system": "git", "status": "ok",
                         "value": 1.5, "unit": "s"}],
            "goals": [{"text": "clone 100: Quire ÷ git clone", "measured": 2.0,
                       "target": "≤ 1.5", "met": False}]}


def test_readme_update_replaces_only_the_marked_block(tmp_path: Path) -> None:
    res = tmp_path / "run-full.json"
    res.write_text(json.dumps(_doc()))
    md = tmp_path / "README.md"
    md.write_text(f"intro\n{readme.START}\nold table\n{readme.END}\nprose after\n")
    assert readme.update(res, md)
    text = md.read_text()
    assert text.startswith("intro\n") and text.endswith("prose after\n")
    assert "old table" not in text
    assert "at commit abc1234" in text
    assert "| clone (vault / working tree written) | 100 | git |" in text
    assert "| clone 100: Quire ÷ git clone | 2 | ≤ 1.5 | NO |" in text
    once = md.read_text()
    assert readme.update(res, md) and md.read_text() == once  # idempotent


def test_readme_without_markers_is_left_untouched(tmp_path: Path) -> None:
    res = tmp_path / "run-full.json"
    res.write_text(json.dumps(_doc()))
    md = tmp_path / "README.md"
    md.write_text("no markers here\n")
    assert not readme.update(res, md)
    assert md.read_text() == "no markers here\n"


def test_repository_readme_has_the_markers() -> None:
    text = readme.README.read_text("utf-8")
    assert text.count(readme.START) == 1 and text.count(readme.END) == 1
