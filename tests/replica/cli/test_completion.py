"""Shell completion (replica/cli/completion.py): the bash, zsh and fish scripts are generated from
the parsers and name every command, ``quire hub …`` included; bash completes for real."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess

import pytest

from replica.cli import completion
from replica.cli.completion import SHELLS, install_path
from replica.cli.main import build_parser


def script(shell: str) -> str:
    return completion.script(shell, build_parser())


def full_parser():
    return completion.full_parser(build_parser())


def command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
                  ) -> list[tuple[str, ...]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append((*prefix, name))
                out.extend(command_paths(sub, (*prefix, name)))
    return out


PATHS = command_paths(full_parser())


def test_the_walk_sees_every_command_family() -> None:
    names = {" ".join(p) for p in PATHS}
    for expected in ("join", "sync", "status", "hub init", "hub serve", "admin invite revoke",
                     "admin rules remove", "conflicts resolve", "delegate create", "doctor",
                     "completion"):
        assert expected in names
    assert len(PATHS) >= 50


def _bash_named(text: str, path: tuple[str, ...]) -> bool:
    var = "_".join(["_shtab_quire", *path[:-1], "subparsers"]).replace("-", "_")
    m = re.search(rf"^{re.escape(var)}=\(([^)]*)\)", text, re.M)
    return bool(m) and path[-1] in m.group(1).split()


def _zsh_named(text: str, path: tuple[str, ...]) -> bool:
    fn = "_".join(["_shtab_quire", *path[:-1], "commands"]).replace("-", "_")
    m = re.search(rf"^{re.escape(fn)}\(\) \{{\n  local _commands=\(\n(.*?)\n  \)", text,
                  re.M | re.S)
    return bool(m) and any(ln.strip().startswith(path[-1] + ":")
                           for ln in m.group(1).splitlines())


def _fish_named(text: str, path: tuple[str, ...]) -> bool:
    m = re.search(r"^set -g _shtab_quire_commands (.*)$", text, re.M)
    listed = re.findall(r"'([^']*)'|(\S+)", m.group(1)) if m else []
    return " ".join(path) in {a or b for a, b in listed}


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_script_names_every_command(shell: str) -> None:
    text = script(shell)
    named = {"bash": _bash_named, "zsh": _zsh_named, "fish": _fish_named}[shell]
    missing = [" ".join(p) for p in PATHS if not named(text, p)]
    assert not missing, f"{shell} completion does not name: {missing}"


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
@pytest.mark.parametrize(("words", "expected"), [
    (["quire", "admin", "invite", ""], {"create", "list", "revoke"}),
    (["quire", "hub", "s"], {"serve"}),
    (["quire", "admin", "invite", "create", "--role", ""], {"viewer", "editor", "admin"}),
])
def test_bash_completes_commands_and_choices(tmp_path, words, expected) -> None:
    f = tmp_path / "quire.bash"
    f.write_text(script("bash"))
    line = " ".join(words)
    prog = (f'source {f}; COMP_WORDS=({" ".join(repr(w) for w in words)}); '
            f'COMP_CWORD={len(words) - 1}; COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}; '
            f'_shtab_quire quire {words[-1]!r} {words[-2]!r}; printf "%s\\n" "${{COMPREPLY[@]}}"')
    done = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, check=True)
    assert set(done.stdout.split()) == expected


def test_install_paths_follow_each_shells_convention(tmp_path) -> None:
    env = {"HOME": str(tmp_path)}
    assert install_path("bash", env) == (
        tmp_path / ".local/share/bash-completion/completions/quire")
    assert install_path("zsh", env) == tmp_path / ".local/share/zsh/site-functions/_quire"
    assert install_path("fish", env) == tmp_path / ".config/fish/completions/quire.fish"
