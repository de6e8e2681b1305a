"""The two-replica half of the sync property test (the oracle and the three-replica half:
tests/replica/engine/test_sync_props.py). A file of its own so that the suite's workers
(``--dist loadfile``) run the halves side by side; it has its own module-scoped hub.

Its explicit examples walk each merge rule of ``replica/engine/merge.py`` once: the two
replicas both hold ``page/a`` (``SHARED``), then each edits it before either syncs again."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.replica.engine.test_sync_props import HALF, Step, histories, run_history
from tests.replica.engine.test_sync_props import world as world  # noqa: F401 - the fixture, per module

# r0 creates page/a (line 5 edited) and publishes it; r1 pulls it
SHARED: list[Step] = [(0, "line", "page/a", 5), (0, "sync", "page/a", 0),
                      (1, "sync", "page/a", 0)]


@pytest.mark.slow
@HALF
@given(n=st.just(2), steps=histories, rule=st.booleans())
# identical sides: both retitle it alike
@example(n=2, rule=False, steps=[*SHARED, (0, "title", "page/a", 1), (1, "title", "page/a", 1)])
# one side changed a field, the other another: each side's field is taken (the title from
# theirs where ours kept the base's)
@example(n=2, rule=False, steps=[*SHARED, (0, "title", "page/a", 1), (1, "line", "page/a", 2)])
# both created page/b, other content: conflict ``create``
@example(n=2, rule=False, steps=[(0, "line", "page/b", 1), (1, "line", "page/b", 2)])
# one deleted, the other edited: conflict ``delete``
@example(n=2, rule=False, steps=[*SHARED, (0, "delete", "page/a", 0), (1, "line", "page/a", 3)])
# tags as sets: both added one
@example(n=2, rule=False, steps=[*SHARED, (0, "tag", "page/a", 0), (1, "tag", "page/a", 1)])
# a scalar both changed: conflict ``title``, conflict ``meta.status``
@example(n=2, rule=False, steps=[*SHARED, (0, "title", "page/a", 1), (1, "title", "page/a", 2)])
@example(n=2, rule=False, steps=[*SHARED, (0, "meta", "page/a", 0), (1, "meta", "page/a", 1)])
# a guardrail's severity both changed (the rule lets the editor lower it): the stricter wins
@example(n=2, rule=True, steps=[(0, "line", "guardrail/g", 5), (0, "sync", "guardrail/g", 0),
                                (1, "sync", "guardrail/g", 0), (0, "severity", "guardrail/g", 2),
                                (1, "severity", "guardrail/g", 0)])
# bodies by lines: apart, merged; the same line, conflict ``body``
@example(n=2, rule=False, steps=[*SHARED, (0, "line", "page/a", 0), (1, "line", "page/a", 3)])
@example(n=2, rule=False, steps=[*SHARED, (0, "line", "page/a", 1), (1, "line", "page/a", 7)])
def test_two_replica_histories_converge_and_every_write_survives_or_was_seen(world, n, steps,
                                                                            rule):
    run_history(world, n, steps, rule)
