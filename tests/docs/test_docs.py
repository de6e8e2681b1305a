"""Docs are tested: every command, endpoint, error code and setting appears in docs/."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _text(*names: str) -> str:
    return "\n".join((DOCS / n).read_text() for n in names if (DOCS / n).exists())


def _commands(parser: argparse.ArgumentParser, prefix: str) -> list[str]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                path = f"{prefix} {name}"
                out.append(path)
                out.extend(_commands(sub, path))
    return out


def _all_commands() -> list[str]:
    from hub.cli import build_parser as hub_parser
    from replica.cli.main import build_parser

    cmds = [c for c in _commands(build_parser(), "quire") if c != "quire hub"]
    return cmds + _commands(hub_parser(), "quire hub")


def test_every_cli_command_is_documented() -> None:
    text = _text("cli.md")
    missing = [c for c in _all_commands() if c not in text]
    assert not missing, f"add these commands to docs/cli.md: {missing}"


def test_every_command_has_help() -> None:
    from replica.cli.main import main

    for cmd in _all_commands():
        argv = cmd.split()[1:] + ["--help"]
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 0, cmd


def test_every_endpoint_is_documented() -> None:
    from hub.api.reads import READ_ROUTES
    from hub.api.routes import ROUTES

    text = _text("protocol.md", "watch.md", "security.md", "operations.md")
    missing = [r.path for r in ROUTES + READ_ROUTES if r.path not in text]
    assert not missing, f"add these endpoints to docs/protocol.md: {missing}"


def test_every_error_code_is_documented() -> None:
    from shared.errors import WIRE_CODES

    text = _text("protocol.md")
    missing = [c for c in WIRE_CODES if f"`{c}`" not in text]
    assert not missing, f"add these error codes to docs/protocol.md: {missing}"


def test_every_setting_is_documented() -> None:
    from hub.settings import Settings

    text = _text("settings.md", "operations.md")
    missing = [f.name for f in fields(Settings) if f.name != "clock" and f"`{f.name}`" not in text]
    assert not missing, f"add these settings to docs/settings.md: {missing}"


def test_every_replica_setting_is_documented() -> None:
    from replica.engine.ledger import QUIET_ENV
    from replica.watch.core import WatchSettings

    text = _text("settings.md")
    missing = [name for name in (QUIET_ENV,) if f"`{name}`" not in text]
    assert not missing, f"add these replica settings to docs/settings.md: {missing}"
    watch = _text("watch.md")
    assert not [f.name for f in fields(WatchSettings) if f"`{f.name}`" not in watch]
