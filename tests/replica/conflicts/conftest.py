"""Helpers for the conflict tests (the replica's fixtures come from tests/replica/conftest.py)."""

from __future__ import annotations

from typing import Any

from shared.entry import Entry, make_entry


def entry(eid: str, body: str, title: str = "Deploy", **kw: Any) -> Entry:
    return make_entry({"id": eid, "title": title, "body": body, **kw})
