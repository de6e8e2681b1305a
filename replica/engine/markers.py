"""The ``quire`` front-matter marker a held entry's vault file carries (local only, never
published): why it is held and what to do, so a person reading the file knows."""

from __future__ import annotations

from typing import Any

from replica.engine import blocked
from replica.engine.purge import PURGED, PURGED_HELP
from replica.engine.scoped import UNREADABLE, UNREADABLE_HELP
from replica.store.store import Conflict


def conflict_marker(c: Conflict) -> dict[str, Any]:
    """The ``quire`` front-matter marker of a held entry (local only, never published);
    a version the hub blocked (replica/engine/push.py) or purged (replica/engine/purge.py) says so in its
    help."""
    return {"conflict": {
        "fields": c.fields,
        "theirs_version": c.theirs.version if c.theirs is not None else None,
        "theirs_deleted": c.theirs is None or c.theirs.deleted,
        "ours_deleted": c.ours is None or c.ours.deleted,
        "help": blocked.HELP if "version_blocked" in c.fields else
        PURGED_HELP if PURGED in c.fields else
        UNREADABLE_HELP if UNREADABLE in c.fields else
        "held: fix this file and remove this 'quire' block to publish it",
    }}


def marker_tag(marker: dict[str, Any] | None) -> str | None:
    """What a store records of the marker a vault file showed (``shown_marker``,
    replica/store/schema.py): the theirs version its conflict marker names ('' for none);
    None: no conflict marker."""
    conflict = (marker or {}).get("conflict")
    if not isinstance(conflict, dict):
        return None
    version = conflict.get("theirs_version")
    return version if isinstance(version, str) else ""


def conflict_tag(c: Conflict) -> str:
    """The ``marker_tag`` of the marker ``c`` is shown with now: removing the marker of a
    file that showed this tag resolves ``c``; any other (none shown, or one naming an older
    theirs) resolves nothing (replica/engine/scan.py)."""
    return c.theirs.version if c.theirs is not None else ""


def special(c: Conflict) -> bool:
    """A held state that is no merge of two versions (a blocked or purged version): only
    the person's removal of a marker shown to them releases it."""
    return bool({"version_blocked", PURGED, UNREADABLE} & set(c.fields))
