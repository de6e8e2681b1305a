"""Fixtures for the proposals tests: the identity tests' in-process team (owner, editor,
viewer, one space)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kit.inproc import inproc_hub, space  # noqa: F401 (fixtures)
from tests.kit.wire import WireTeam, make_wire_team


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireTeam]:
    yield from make_wire_team(tmp_path_factory.mktemp("hub") / "data", None)
