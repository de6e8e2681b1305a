"""Output for people: aligned tables and a little colour, decided in one place.

    table(columns, rows)  ─► terminal: a rich table (header rule, colour unless NO_COLOR)
                          └► pipe or file: plain columns two spaces apart, no colour,
                             no trailing blanks (what grep, cut and a log expect)
    paint(text, style)    ─► the text in a colour on a terminal, the text alone elsewhere

Colour only when stdout is a terminal and never with ``NO_COLOR`` set (https://no-color.org)
or ``TERM=dumb``. ``--json`` output never comes here.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
from collections.abc import Sequence
from typing import Any, TextIO

STATE_STYLE = {"ok": "green", "pending": "yellow", "conflicts": "yellow", "problems": "yellow",
               "never_synced": "yellow", "error": "red", "suspended": "red"}


def is_terminal(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stdout
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def use_color(stream: TextIO | None = None) -> bool:
    if "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    return is_terminal(stream)


def _console(stream: TextIO | None, buf: io.StringIO) -> Any:
    from rich.console import Console

    color = use_color(stream)
    width = shutil.get_terminal_size((100, 24)).columns if is_terminal(stream) else 10_000
    return Console(file=buf, force_terminal=color, no_color=not color,
                   color_system="standard" if color else None, width=width,
                   highlight=False, emoji=False, markup=False, soft_wrap=not is_terminal(stream))


def paint(text: str, style: str | None, stream: TextIO | None = None) -> str:
    if not style or not use_color(stream):
        return text
    from rich.text import Text

    buf = io.StringIO()
    _console(stream, buf).print(Text(text, style=style), end="")
    return buf.getvalue()


def state(name: str, stream: TextIO | None = None) -> str:
    return paint(name, STATE_STYLE.get(name), stream)


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, empty: str = "",
          stream: TextIO | None = None) -> str:
    """Rows under a header, aligned; ``empty`` when there are none."""
    if not rows:
        return empty
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    if not is_terminal(stream):
        widths = [max(len(r[i]) for r in [list(columns), *cells]) for i in range(len(columns))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                 for r in [list(columns), *cells]]
        return "\n".join(lines)
    from rich import box
    from rich.table import Table

    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
              header_style="bold" if use_color(stream) else None)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in cells:
        t.add_row(*r)
    buf = io.StringIO()
    _console(stream, buf).print(t)
    return "\n".join(ln.rstrip() for ln in buf.getvalue().rstrip("\n").splitlines())
