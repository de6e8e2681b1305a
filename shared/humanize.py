"""Times as people read them, for human output (``--json`` keeps Unix milliseconds).

    when(expires_at, now)  ->  "in 6 days, 2026-12-07 15:02 CET"  /  "3 hours ago, …"
    duration(ms)           ->  "6 days", "3 hours", "45 s", "120 ms"

Times are shown in the local time zone (``TZ`` is respected), with its abbreviation;
``--json`` keeps Unix milliseconds, which are UTC. Pure functions but for the zone: the
caller passes ``now`` (milliseconds), so tests need no clock.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

_UNITS = ((86400_000, "day"), (3600_000, "hour"), (60_000, "minute"))


def now_ms() -> int:
    return int(time.time() * 1000)


def stamp(ms: int, *, seconds: bool = False, utc: bool = False) -> str:
    """``2026-12-07 15:02 CET`` in the local time zone (``14:02:09`` with ``seconds``;
    ``2026-12-07 14:02 UTC`` with ``utc``)."""
    fmt = "%Y-%m-%d %H:%M:%S %Z" if seconds else "%Y-%m-%d %H:%M %Z"
    at = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return (at if utc else at.astimezone()).strftime(fmt)


def duration(ms: int) -> str:
    """Rounded in the largest unit that fits: ``7 days``, ``1 hour``, ``12 minutes``, ``45 s``,
    ``120 ms`` (an invite made for 7 days reads "7 days", not "6 days" a second later)."""
    ms = abs(int(ms))
    for size, name in _UNITS:
        if ms >= size:
            n = round(ms / size)
            return f"{n} {name}{'s' if n != 1 else ''}"
    return f"{round(ms / 1000)} s" if ms >= 1000 else f"{ms} ms"


def when(ms: int | None, now: int | None = None, *, never: str = "never") -> str:
    """``in 6 days, 2026-12-07 15:02 CET`` or ``3 hours ago, 2026-11-30 12:02 CET`` (the
    local time zone)."""
    if not isinstance(ms, int) or isinstance(ms, bool):
        return never
    now = now_ms() if now is None else now
    delta = ms - now
    rel = f"in {duration(delta)}" if delta >= 0 else f"{duration(delta)} ago"
    return f"{rel}, {stamp(ms)}"
