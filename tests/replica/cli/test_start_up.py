"""What a ``quire`` process pays before its command runs (bench/profiles.md, start-up)."""

from __future__ import annotations

import argparse
import gettext

import pytest

from replica.cli import main as cli_main


def test_argparse_looks_for_a_catalog_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """argparse translates each of its strings; without a catalog, gettext searched the disk
    for one at every string (~300 searches a command). After ``_translate_once`` building
    the whole parser searches none, and its messages are the same."""
    searches: list[str] = []
    real_find = gettext.find

    def counting(*a: object, **k: object) -> object:
        searches.append(str(a[0]))
        return real_find(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(gettext, "find", counting)
    monkeypatch.setattr(argparse, "_", argparse._)  # type: ignore[attr-defined]
    monkeypatch.setattr(argparse, "ngettext", argparse.ngettext)  # type: ignore[attr-defined]
    cli_main._translate_once()
    assert len(searches) == 1  # the one look-up
    parser = cli_main.build_parser()
    assert len(searches) == 1
    assert "show this help message and exit" in parser.format_help()
    with pytest.raises(cli_main.UsageError, match="the following arguments are required"):
        parser.parse_args([])
