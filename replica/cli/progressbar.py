"""The progress bar of a clone or a large pull, on a terminal only (``Out.progress`` never
starts one with ``--json`` or when stderr is not a terminal): entries done of the total the
hub announced, the rate and the time left. Drawn on stderr, gone when it ends."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class RateColumn(ProgressColumn):
    """``12,345 entries/s`` (or batches, for a pull) once rich has two samples."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        unit = task.fields.get("unit", "entries")
        return Text("" if speed is None else f"{speed:,.0f} {unit}/s")


def start(label: str) -> tuple[Callable[..., None], Callable[[], None]]:
    """(update(done, total, unit="entries"), stop) of a bar drawn now."""
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   RateColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                   console=Console(stderr=True), transient=True)
    task = bar.add_task(label, total=None, unit="entries")
    bar.start()

    def update(done: int, total: int | None, unit: str = "entries") -> None:
        bar.update(task, completed=done, total=total, unit=unit)

    return update, bar.stop
