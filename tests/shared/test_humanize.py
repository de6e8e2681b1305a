"""Times as people read them (shared/humanize.py)."""

from __future__ import annotations

import time

import pytest

from shared.humanize import duration, stamp, when

NOW = 1_796_000_000_000  # 2026-11-30 ...
DAY = 86_400_000


@pytest.mark.parametrize(("ms", "text"), [
    (0, "0 ms"), (120, "120 ms"), (45_000, "45 s"), (60_000, "1 minute"),
    (12 * 60_000, "12 minutes"), (3600_000, "1 hour"), (7 * DAY - 1, "7 days"),
    (6 * DAY + 3600_000, "6 days"), (-2 * 3600_000, "2 hours"),
])
def test_durations_in_the_largest_unit(ms: int, text: str) -> None:
    assert duration(ms) == text


@pytest.fixture
def zone(monkeypatch: pytest.MonkeyPatch):
    """Set the process's local time zone (TZ), restored afterwards."""
    def use(tz: str) -> None:
        monkeypatch.setenv("TZ", tz)
        time.tzset()
    yield use
    monkeypatch.undo()
    time.tzset()


def test_human_times_are_in_the_local_time_zone(zone) -> None:
    """Before: every human time was UTC whatever TZ said."""
    zone("CET-1CEST,M3.5.0,M10.5.0/3")  # Paris, without tzdata
    assert stamp(1_796_652_120_000) == "2026-12-07 15:02 CET"
    assert when(1_796_652_120_000, 1_796_652_120_000 - DAY).endswith("15:02 CET")
    assert stamp(1_796_652_120_000, utc=True) == "2026-12-07 14:02 UTC"
    zone("EST5EDT,M3.2.0,M11.1.0")  # New York
    assert stamp(1_796_652_120_000, seconds=True) == "2026-12-07 09:02:00 EST"


def test_when_says_how_far_and_the_time(zone) -> None:
    zone("UTC")
    assert stamp(1_796_652_120_000) == "2026-12-07 14:02 UTC"
    assert when(1_796_652_120_000, 1_796_652_120_000 - 6 * DAY) == (
        "in 6 days, 2026-12-07 14:02 UTC")
    assert when(NOW - 3 * 3600_000, NOW).startswith("3 hours ago, ")
    assert when(None, NOW) == "never"
