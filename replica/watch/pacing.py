"""Pure pacing for the watcher (replica/watch/core.py) and its event stream thread: exponential
backoff with jitter, and the debounce of vault edits. Both read an injected clock (or a
random source) and never sleep, so they are tested by moving a fake clock."""

from __future__ import annotations

import random
from collections.abc import Callable


class Backoff:
    """Exponential backoff with jitter, capped; ``reset`` after a success."""

    def __init__(self, initial_ms: int, max_ms: int, jitter: float,
                 rand: Callable[[], float] = random.random):
        self.initial_ms, self.max_ms, self.jitter, self.rand = initial_ms, max_ms, jitter, rand
        self.attempt = 0

    def base(self, attempt: int) -> int:
        return min(self.max_ms, self.initial_ms * (1 << min(attempt, 40)))

    def bounds(self, attempt: int) -> tuple[int, int]:
        b = self.base(attempt)
        return int(b * (1 - self.jitter)), b

    def next(self) -> int:
        b = self.base(self.attempt)
        self.attempt += 1
        return int(b - b * self.jitter * self.rand())

    def reset(self) -> None:
        self.attempt = 0


class Debouncer:
    """Due ``delay_ms`` after the last touch, or ``max_ms`` after the first, whichever first."""

    def __init__(self, delay_ms: int, max_ms: int, clock: Callable[[], int]):
        self.delay_ms, self.max_ms, self.clock = delay_ms, max_ms, clock
        self.first: int | None = None
        self.last: int | None = None

    def touch(self) -> None:
        now = self.clock()
        if self.first is None:
            self.first = now
        self.last = now

    @property
    def pending(self) -> bool:
        return self.first is not None

    def deadline(self) -> int | None:
        if self.first is None or self.last is None:
            return None
        return min(self.last + self.delay_ms, self.first + self.max_ms)

    def due(self) -> bool:
        d = self.deadline()
        return d is not None and self.clock() >= d

    def clear(self) -> None:
        self.first = self.last = None
