"""Fixtures of both replica tiers, for every room under tests/replica/.

In-process (tests/kit/inproc.py): ``inproc_hub``, the real hub application on a temporary
SQLite database (one per session), and ``space``, a fresh space on it per test.

End-to-end (tests/kit/cli.py): ``hub``, a real ``quire hub serve`` process (one per
session), ``owner``, the machine that redeemed its enrollment code, and ``team``, a fresh
space on that hub with ``team.member(name)`` joining a new machine with the real CLI.
"""

from tests.kit.cli import hub, owner, team  # noqa: F401 (fixtures)
from tests.kit.inproc import inproc_hub, space  # noqa: F401 (fixtures)
