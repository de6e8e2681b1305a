"""The two-replica half of the sync property test (the oracle and the three-replica half:
tests/replica/engine/test_sync_props.py). A file of its own so that the suite's workers
(``--dist loadfile``) run the halves side by side; it has its own module-scoped hub."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.replica.engine.test_sync_props import HALF, run_history, step
from tests.replica.engine.test_sync_props import world as world  # noqa: F401 - the fixture, per module


@pytest.mark.slow
@HALF
@given(n=st.just(2), steps=st.lists(step, max_size=25), rule=st.booleans())
def test_two_replica_histories_converge_and_every_write_survives_or_was_seen(world, n, steps,
                                                                            rule):
    run_history(world, n, steps, rule)
