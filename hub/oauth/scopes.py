"""What an OAuth scope may say, pure (docs/agents.md, "Remote endpoint").

    read       read, search, list, history and the world model of the one space
    propose    also file proposals (a member accepts or rejects them in the console)
    write      also publish directly, when the space allows remote writes
    space:NAME the space the client asks for (the member may choose it at consent otherwise)

A token answers for exactly one space, the one its consent names: the space is never a
scope a token can widen.
"""

from __future__ import annotations

import re

ACTIONS = ("read", "propose", "write")
SPACE = re.compile(r"^space:([a-z0-9][a-z0-9._-]{0,62})$")


class ScopeError(ValueError):
    """A scope the hub does not know."""


def parse(raw: str | None) -> tuple[list[str], str | None]:
    """(actions asked, space named or None) of a scope string; ``read`` when none asked."""
    actions: list[str] = []
    space = None
    for s in (raw or "").split():
        m = SPACE.match(s)
        if m:
            if space is not None and space != m.group(1):
                raise ScopeError("at most one space: a token answers for one space")
            space = m.group(1)
        elif s in ACTIONS:
            if s not in actions:
                actions.append(s)
        else:
            raise ScopeError(f"unknown scope {s!r}: read, propose, write or space:NAME")
    return (actions or ["read"]), space


def closed(actions: list[str]) -> list[str]:
    """Every action implies those before it: write ⊃ propose ⊃ read."""
    top = max((ACTIONS.index(a) for a in actions), default=0)
    return list(ACTIONS[:top + 1])


def allows(granted: list[str], action: str) -> bool:
    return action in closed(granted)
