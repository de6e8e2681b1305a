"""Fixtures for the conflict tests: the replica's end-to-end fixtures (real ``quire hub
serve`` processes, the real CLI, one ``QUIRE_HOME`` per member) re-exported here."""

from __future__ import annotations

from typing import Any

from shared.entry import Entry, make_entry
from tests.replica.conftest import hub, owner, qjson, quire  # noqa: F401 (fixtures, helpers)


def entry(eid: str, body: str, title: str = "Deploy", **kw: Any) -> Entry:
    return make_entry({"id": eid, "title": title, "body": body, **kw})
