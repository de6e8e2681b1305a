"""What ``quire hub init`` tells a person to do next. Every step is a command that works when
pasted (``tests/docs/test_tour.py`` pastes them): the serve line listens where the public URL
says, the join lines use that URL, and only the codes a later step prints are placeholders.

    hub init ──► serve (unless the caller serves next: ``make run``) ──► owner joins
             ──► space create ──► invite create ──► member joins (own QUIRE_HOME on this machine)
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit

from shared.humanize import when

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8470
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def serve_command(data: Path, url: str) -> tuple[str, str | None]:
    """The ``quire hub serve`` line for a hub reached at ``url``, and a note when the URL is
    one a proxy answers (then the hub listens on the defaults behind it)."""
    parts = urlsplit(url)
    cmd = f"quire hub serve --data {shlex.quote(str(data))}"
    if parts.scheme != "http" or parts.hostname is None:
        return cmd, (f"put a reverse proxy for {url} in front of http://{DEFAULT_HOST}:"
                     f"{DEFAULT_PORT} (docs/operations.md, \"Reverse proxy\")")
    host = parts.hostname
    port = parts.port or 80
    if host not in LOOPBACK:
        cmd += f" --host {host}"
    if port != DEFAULT_PORT:
        cmd += f" --port {port}"
    return cmd, None


def _activate_step() -> str | None:
    """``source …/bin/activate`` when the ``quire`` that runs is not the one on PATH."""
    bindir = Path(sys.executable).parent
    found = shutil.which("quire")
    if found and Path(found).resolve().parent == bindir.resolve():
        return None
    activate = bindir / "activate"
    if not activate.exists():
        return None
    try:
        shown = activate.relative_to(Path.cwd())
    except ValueError:
        shown = activate
    return f"source {shlex.quote(str(shown))}"


def init_steps(*, data: Path, url: str, url_given: bool, code: str, expires_at: int,
               now: int, serving: bool = False) -> str:
    """The human output of ``quire hub init``."""
    lines = [f"Owner enrollment code (one-time, expires {when(expires_at, now)}; "
             "it is not stored anywhere):", "", f"    {code}", ""]
    if url_given:
        lines.append(f"Clients reach this hub at {url}.")
    else:
        lines.append(f"Clients reach this hub at {url} (the default; for another address or "
                     f"port: quire hub record --data {shlex.quote(str(data))} --public-url URL).")
    steps: list[tuple[str, str]] = []
    activate = _activate_step()
    if activate:
        steps.append(("put quire on your PATH:", activate))
    if not serving:
        serve, note = serve_command(data, url)
        steps.append(("serve it:", serve))
        if note:
            steps.append(("", f"# {note}"))
    steps += [
        ("join as the owner:", f"quire join {url} --invite {code}"),
        ("create a space:", "quire admin space create team-memory"),
        ("invite a member:", "quire admin invite create team-memory --role editor"),
        ("the member joins:", f"quire join {url} --invite <code from the step above> "
                              "--vault ./memory"),
        ("", "# on this same machine, give the member its own home first:"),
        ("", "#   export QUIRE_HOME=$PWD/member-home"),
    ]
    lines.append("")
    lines.append("Next steps" + (" (in another terminal: this one serves the hub)"
                                 if serving else "") + ":")
    n = 0
    for label, cmd in steps:
        if label:
            n += 1
            lines.append(f"  {n}. {label:<24} {cmd}")
        else:
            lines.append(f"     {'':<24} {cmd}")
    return "\n".join(lines) + "\n"
