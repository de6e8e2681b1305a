"""Remote reads (docs/protocol.md, "Remote reads"): members read a space without a replica.

    list_entries, get_entry (at the head)   the entries table, read with the head in one
                                            transaction
    get_entry at a seq, history, diff,      the read index (hub/store/read_index.py), first
    search                                  brought up to the head by catch_up()

Every answer names the head it was read at (``{"epoch", "seq"}``). Access is the pull's:
members of any role read; a non-member gets ``not_found`` for the space, as everywhere.
Read rules (hub/scope.py, shared/readscope.py) narrow it: the reader's scope is read in the
transaction that builds the answer, and an entry outside it is answered exactly as an entry
that does not exist (``not_found``), left out of lists, searches, totals and batches. The
remote MCP tools and the console call these functions, and so get the same filtering.

catch_up() parses each accepted batch once, in order, in bounded write transactions that
lock the space's index row (one indexer per space at a time). It records one version row per
entry change and keeps the searchable text of every live entry at the indexed head. When the
space moved to a new epoch, the entries live at the end of the old one are carried over as
the new epoch's base rows (seq 0), so ``get`` at any seq of the current epoch is answered.
The index is derived: dropping it loses nothing but time.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hub import blobs
from hub import scope as scopes
from hub.access import Principal, space_access_txn
from hub.store import read_index as ri
from hub.store.db import Store
from hub.store.principals import list_members_txn, names_txn
from hub.store.spaces_sql import get_space_txn
from shared.entry import make_entry, tombstone
from shared.errors import Forbidden, InvalidRequest, NotFound
from shared.ids import is_entry_id, is_id
from shared.search import search_terms

INDEX_STEP = 500  # batches parsed per indexing transaction
# a page the space does not have (the caller reads the space): not the hub refusing the
# caller, so the CLI exits 1 for it, not 5 (docs/cli.md, "Exit codes")
_NO_ENTRY = {"reason": "no_entry"}
SNIPPET = 80  # characters either side of the first hit
SCOPED_SEARCH_MAX = 2000  # hits a scoped reader's search filters (its total counts at most these)


@dataclass(frozen=True)
class Limits:
    list_default: int = 100
    list_max: int = 500
    search_default: int = 20
    search_max: int = 100
    history_default: int = 50
    history_max: int = 500


LIMITS = Limits()


# ---------------------------------------------------------------- parameters


def parse_limit(raw: str | None, default: int, maximum: int) -> int:
    if raw is None:
        return default
    try:
        n = int(raw)
    except ValueError as e:
        raise InvalidRequest("limit must be an integer") from e
    if not 1 <= n <= maximum:
        raise InvalidRequest(f"limit must be between 1 and {maximum}")
    return n


def parse_seq(raw: str | None, name: str = "seq") -> int | None:
    if raw is None:
        return None
    try:
        n = int(raw)
    except ValueError as e:
        raise InvalidRequest(f"{name} must be an integer") from e
    if n < 0:
        raise InvalidRequest(f"{name} must be >= 0")
    return n


def parse_entry_id(raw: str | None) -> str:
    if raw is None or not is_entry_id(raw):
        raise InvalidRequest("id must be an entry id (<kind>/<slug>)")
    return raw


def parse_epoch(raw: str | None) -> str | None:
    if raw is not None and not is_id(raw):
        raise InvalidRequest("epoch must be an epoch id")
    return raw


# ---------------------------------------------------------------- the index


def _searchable(entry: dict[str, Any]) -> tuple[str, str, str]:
    return (entry.get("title", ""), " ".join(entry.get("tags", [])), entry.get("body", ""))


def _apply_batch_txn(conn: Any, space_id: str, epoch: str, seq: int, body: str) -> None:
    for op in json.loads(body)["ops"]:
        if op["op"] == "put":
            entry = make_entry(op["entry"])
            ri.add_version_txn(conn, space_id, entry.id, epoch, seq, entry.version, False)
            ri.set_text_txn(conn, space_id, entry.id, _searchable(op["entry"]))
        else:
            ri.add_version_txn(conn, space_id, op["id"], epoch, seq,
                               tombstone(op["id"]).version, True)
            ri.set_text_txn(conn, space_id, op["id"], None)


def index_restored_txn(conn: Any, space_id: str, epoch: str,
                       live: list[tuple[str, str, dict[str, Any]]]) -> None:
    """A restore (hub/restore.py) starts ``epoch`` from the backup's entries, not from the
    previous epoch's end: its base rows (seq 0) and the searchable text are those entries
    ``(id, version, entry)``, and the index stands at the new head (epoch, 0)."""
    ri.lock_state_txn(conn, space_id)
    ri.clear_text_txn(conn, space_id)
    for entry_id, version, entry in live:
        ri.add_version_txn(conn, space_id, entry_id, epoch, 0, version, False)
        ri.set_text_txn(conn, space_id, entry_id, _searchable(entry))
    ri.set_state_txn(conn, space_id, epoch, 0)


def _index_step_txn(conn: Any, space_id: str) -> bool:
    """One bounded step towards the head; True when the index is at the head."""
    state = ri.lock_state_txn(conn, space_id)
    space = get_space_txn(conn, space_id)
    assert space is not None
    target = ri.IndexState(space.epoch, space.head_seq)
    if state == target:
        return True
    epochs = sorted(set(ri.epochs_txn(conn, space_id)) | {space.epoch})
    if state is None:
        state = ri.IndexState(epochs[0], 0)
    epoch, seq = state
    if epoch == target.epoch:
        rows = ri.batches_after_txn(conn, space_id, epoch, seq, INDEX_STEP)
        rows = [r for r in rows if r[0] <= target.seq]
    else:
        rows = ri.batches_after_txn(conn, space_id, epoch, seq, INDEX_STEP)
    for n, body in rows:
        _apply_batch_txn(conn, space_id, epoch, n, body)
    if rows:
        ri.set_state_txn(conn, space_id, epoch, rows[-1][0])
        return epoch == target.epoch and rows[-1][0] == target.seq
    if epoch == target.epoch:  # nothing after seq: the head is there
        ri.set_state_txn(conn, space_id, epoch, target.seq)
        return True
    # the old epoch is fully indexed: carry its live entries over into the next one
    later = [e for e in epochs if e > epoch]
    nxt = later[0] if later else target.epoch
    ri.carry_over_txn(conn, space_id, epoch, nxt)
    ri.set_state_txn(conn, space_id, nxt, 0)
    return False


def catch_up(store: Store, space_id: str) -> None:
    """Bring the space's read index up to its head (bounded transactions, any number)."""
    with store.read() as conn:
        state = ri.state_txn(conn, space_id)
        space = get_space_txn(conn, space_id)
        if space is not None and state == (space.epoch, space.head_seq):
            return
    while not store.run_write(lambda conn: _index_step_txn(conn, space_id)):
        pass


# ---------------------------------------------------------------- reads


@contextmanager
def indexed(store: Store, p: Principal, space_ref: str
             ) -> Iterator[tuple[Any, Any, Any, scopes.ReadScope]]:
    """(conn, space, index state, the reader's scope): access checked, the read index
    brought up to the head, then one consistent read transaction over it, in which access
    and the scope are read again (a rule or a role change committed before it holds)."""
    with store.read() as conn:  # access, and whether the index is behind, in one read
        space, _ = space_access_txn(conn, p, space_ref, "viewer")
        behind = ri.state_txn(conn, space.id) != (space.epoch, space.head_seq)
    if behind:
        catch_up(store, space.id)
    with store.read(snapshot=True) as conn:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        state = ri.state_txn(conn, space.id)
        assert state is not None  # catch_up left it at the head
        yield conn, space, state, scopes.scope_txn(conn, p, space, role)


def _readable_txn(conn: Any, space: Any, scope: scopes.ReadScope, entry_id: str) -> bool:
    return entry_id in scopes.visible_txn(conn, space.id, scope, [entry_id])


def _shown_txn(conn: Any, space: Any, scope: scopes.ReadScope, *entries: dict[str, Any] | None
               ) -> int:
    """Drop from each entry shown the links to entries outside the scope (in place); how
    many were dropped (an answer says ``links_withheld``). A pull sends an entry's content
    as written (its version is a digest of it): there its links may name such ids."""
    links = [x for e in entries if e for x in e.get("links", [])]
    if scope.unrestricted or not links:
        return 0
    seen = scopes.visible_txn(conn, space.id, scope, links)
    dropped = 0
    for e in entries:
        if e and e.get("links"):
            kept = [x for x in e["links"] if x in seen]
            dropped += len(e["links"]) - len(kept)
            e["links"] = kept
    return dropped


def _head(epoch: str, seq: int) -> dict[str, Any]:
    return {"epoch": epoch, "seq": seq}


def list_entries(store: Store, p: Principal, space_ref: str, *, prefix: str, after: str,
                 limit: int, guardrails: bool = False) -> dict[str, Any]:
    """Live entries at the head, by id, ``prefix`` (e.g. ``guardrail/``) and a cursor;
    ``guardrails``: the live guardrails in any folder instead (``prefix`` unused)."""
    if len(prefix) > 240 or len(after) > 240:
        raise InvalidRequest("prefix and after are at most 240 characters")
    with store.read(snapshot=True) as conn:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        scope = scopes.scope_txn(conn, p, space, role)
        rows: list[Any] = []
        cursor, more = after, True
        while more and len(rows) <= limit:  # pages until limit + 1 readable ones, or none
            got = (ri.list_live_guardrails_txn(conn, space.id, cursor, limit + 1)
                   if guardrails else ri.list_live_txn(conn, space.id, prefix, cursor,
                                                       limit + 1))
            more = len(got) > limit
            if got:
                cursor = got[-1][0]
            rows += [r for r in got if scopes.readable_content(scope, r[0], r[3])]
    items = []
    for entry_id, version, seq, content, changed_at in rows[:limit]:
        items.append({"id": entry_id, "version": version, "title": json.loads(content)
                      .get("title", ""), "changed_seq": seq, "changed_at": changed_at})
    return {"head": _head(space.epoch, space.head_seq), "entries": items,
            "next": items[-1]["id"] if len(rows) > limit else None}


def _content_at_txn(conn: Any, space_id: str, entry_id: str, row: ri.VersionRow
                    ) -> dict[str, Any]:
    got = ri.put_in_batch_txn(conn, space_id, row.src_epoch, row.src_seq, entry_id)
    if got is None:
        raise NotFound(f"the history of {entry_id} at this seq is no longer held")
    return got


def _entry_at_txn(conn: Any, space: Any, state: ri.IndexState, entry_id: str,
                  epoch: str | None, seq: int | None) -> tuple[dict[str, Any], Any] | None:
    """(entry, version row) at (epoch, seq) of the index, None when it did not exist."""
    epoch = epoch or state.epoch
    at = state.seq if seq is None else seq
    if epoch == state.epoch and at > state.seq:
        raise InvalidRequest(f"seq {at} is after the head ({state.seq})",
                             {"head": _head(*state)})
    row = ri.version_at_txn(conn, space.id, entry_id, epoch, at)
    if row is None or row.deleted:
        return None
    return _content_at_txn(conn, space.id, entry_id, row), row


def get_entry(store: Store, p: Principal, space_ref: str, entry_id: str, *,
              seq: int | None = None, epoch: str | None = None) -> dict[str, Any]:
    """One entry at the head, or as it was right after batch ``seq`` (of ``epoch``)."""
    if seq is None and epoch is None:
        with store.read(snapshot=True) as conn:
            space, role = space_access_txn(conn, p, space_ref, "viewer")
            found = ri.live_entry_txn(conn, space.id, entry_id)
            scope = scopes.scope_txn(conn, p, space, role)
            if found is None or not scopes.readable_content(scope, entry_id, found[2]):
                raise NotFound(f"no entry {entry_id} at the head", _NO_ENTRY)
            version, changed, content = found
            entry = json.loads(content)
            dropped = _shown_txn(conn, space, scope, entry)
        return {"head": _head(space.epoch, space.head_seq),
                "at": _head(space.epoch, space.head_seq), "entry": entry,
                "version": version, "changed_seq": changed,
                **({"links_withheld": dropped} if dropped else {}),
                **blobs.blob_link(space.id, entry)}
    with indexed(store, p, space_ref) as (conn, space, state, scope):
        got = _entry_at_txn(conn, space, state, entry_id, epoch, seq)
        if got is not None and not _readable_txn(conn, space, scope, entry_id):
            got = None  # outside the scope: answered as absent
        dropped = _shown_txn(conn, space, scope, got[0] if got else None)
    at = _head(epoch or state.epoch, state.seq if seq is None else seq)
    if got is None:
        raise NotFound(f"no entry {entry_id} at seq {at['seq']}", dict(_NO_ENTRY, at=at))
    entry, row = got
    return {"head": _head(*state), "at": at, "entry": entry, "version": row.version,
            "changed_seq": row.src_seq if row.src_epoch == at["epoch"] else 0,
            **({"links_withheld": dropped} if dropped else {}),
            **blobs.blob_link(space.id, entry)}


def history(store: Store, p: Principal, space_ref: str, entry_id: str, limit: int
            ) -> dict[str, Any]:
    """Every change of one entry, newest first: seq, version, author, agent, provenance.
    A rename is followed: the version a batch put ``from`` another id (docs/protocol.md,
    "Renames") names it, and the older versions are that id's; each row names its ``id``."""
    out: list[dict[str, Any]] = []
    with indexed(store, p, space_ref) as (conn, space, state, scope):
        cur: str | None = entry_id
        before: ri.IndexState | None = None
        while cur is not None and len(out) < limit and _readable_txn(conn, space, scope, cur):
            eid, cur = cur, None
            for row in ri.history_txn(conn, space.id, eid, limit - len(out), before):
                b = ri.batch_at_txn(conn, space.id, row.epoch, row.seq)
                if b is None:
                    continue
                body, user, device, agent, accepted_at = b
                doc = json.loads(body)
                moved = None if row.deleted else _moved_from(doc, eid)
                if moved is not None and not _readable_txn(conn, space, scope, moved):
                    moved = None  # a name outside the reader's scope is not told
                out.append({"id": eid, "epoch": row.epoch, "seq": row.seq,
                            "version": row.version, "deleted": row.deleted,
                            "accepted_at": accepted_at,
                            "author": {"user": user, "device": device, "agent": agent},
                            "provenance": doc.get("provenance"),
                            **({"from": moved} if moved is not None else {})})
                if moved is not None:  # the older versions are the old name's
                    cur, before = moved, ri.IndexState(row.epoch, row.seq)
                    break
    if not out:
        raise NotFound(f"no history for {entry_id}", _NO_ENTRY)
    return {"head": _head(*state), "id": entry_id, "versions": out}


def _moved_from(batch: dict[str, Any], entry_id: str) -> str | None:
    """The id a batch renamed ``entry_id`` from (its put's ``from``), or None."""
    for op in batch.get("ops") or []:
        if op.get("op") == "put" and op["entry"]["id"] == entry_id:
            moved = op.get("from")
            return moved if isinstance(moved, str) else None
    return None


def people(store: Store, p: Principal, space_ref: str) -> dict[str, Any]:
    """The display names of the space's members, for any member: what a replica shows
    instead of user ids (``quire log``, a sync's lines). Names only: roles and whether an
    account is active stay with admins (``GET …/members``)."""
    with store.read() as conn:
        space, _ = space_access_txn(conn, p, space_ref, "viewer")
        rows = list_members_txn(conn, space.id)
    return {"head": _head(space.epoch, space.head_seq),
            "people": [{"user_id": r["user_id"], "name": r["name"]} for r in rows]}


MAX_NAMED = 5000  # ids named in one call (a page of history or audit holds far fewer)


def names(store: Store, p: Principal, space_ref: str | None, ids: set[str]
          ) -> dict[str, str]:
    """Display names for ids the caller already reads in a space (its history's authors,
    its audit's actors and details) or, with ``space_ref`` None, in the hub's audit (hub
    owners): users (former members too), devices, replicas and spaces. Ids it does not
    know stay out of the answer. For the console, which shows names instead of ids; not an
    API route (a caller could ask for ids it never saw)."""
    if len(ids) > MAX_NAMED:
        raise InvalidRequest(f"at most {MAX_NAMED} ids are named at once")
    with store.read() as conn:
        if space_ref is None:
            if not p.is_owner:
                raise Forbidden("the hub's audit is for hub owners")
        else:
            space_access_txn(conn, p, space_ref, "viewer")
        return names_txn(conn, {i for i in ids if is_id(i)})


def batch(store: Store, p: Principal, space_ref: str, *, seq: int, epoch: str | None
          ) -> dict[str, Any]:
    """What one accepted batch did: each op's entry id, kind and version, who published it
    (user, device, agent) and its provenance (``quire admin revert`` plans from this)."""
    with store.read(snapshot=True) as conn:
        space, role = space_access_txn(conn, p, space_ref, "viewer")
        e = epoch or space.epoch
        found = ri.batch_at_txn(conn, space.id, e, seq)
        b = json.loads(found[0]) if found is not None else {"ops": []}
        ids = [op["entry"]["id"] if op["op"] == "put" else op["id"] for op in b["ops"]]
        seen = scopes.visible_txn(conn, space.id, scopes.scope_txn(conn, p, space, role), ids)
    # a batch of nothing the reader may read is, to it, no batch
    if found is None or (ids and not seen):
        raise NotFound(f"no batch at seq {seq} of epoch {e}")
    body, user, device, agent, accepted_at = found
    ops = []
    for op, eid in zip(b["ops"], ids, strict=True):
        if eid not in seen:
            continue
        if op["op"] == "put":
            ops.append({"id": op["entry"]["id"], "op": "put", "base": op["base"],
                        "version": make_entry(op["entry"]).version,
                        **({"from": op["from"]} if op.get("from") in seen else {})})
        else:
            ops.append({"id": op["id"], "op": "delete", "base": op["base"],
                        "version": tombstone(op["id"]).version})
    return {"head": _head(space.epoch, space.head_seq), "epoch": e, "seq": seq,
            "batch_id": b["batch_id"], "accepted_at": accepted_at,
            "author": {"user": user, "device": device, "agent": agent},
            "provenance": b.get("provenance"), "ops": ops}


_FIELDS = ("title", "tags", "links", "meta")


def diff_entries(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """What changed between two states of an entry (None: absent): changed front-matter
    fields as [before, after], and the body as a unified diff."""
    a, b = old or {}, new or {}
    fields = {f: [a.get(f), b.get(f)] for f in _FIELDS if a.get(f) != b.get(f)}
    body = "".join(difflib.unified_diff(
        a.get("body", "").splitlines(keepends=True), b.get("body", "").splitlines(keepends=True),
        fromfile="before", tofile="after"))
    return {"fields": fields, "body": body, "created": old is None and new is not None,
            "deleted": old is not None and new is None}


def diff(store: Store, p: Principal, space_ref: str, entry_id: str, *, from_seq: int,
         to_seq: int | None, epoch: str | None) -> dict[str, Any]:
    """The change of one entry between two seqs of one epoch (``to`` defaults to the head)."""
    with indexed(store, p, space_ref) as (conn, space, state, scope):
        if not _readable_txn(conn, space, scope, entry_id):
            raise NotFound(f"no entry {entry_id} at seq {from_seq}", _NO_ENTRY)
        old = _entry_at_txn(conn, space, state, entry_id, epoch, from_seq)
        new = _entry_at_txn(conn, space, state, entry_id, epoch, to_seq)
        _shown_txn(conn, space, scope, old[0] if old else None, new[0] if new else None)
    to = state.seq if to_seq is None else to_seq
    e = epoch or state.epoch
    return {"head": _head(*state), "id": entry_id, "from": _head(e, from_seq),
            "to": _head(e, to), "from_version": old[1].version if old else None,
            "to_version": new[1].version if new else None,
            **diff_entries(old[0] if old else None, new[0] if new else None)}


def _snippet(body: str, terms: list[str]) -> str:
    low = body.lower()
    hits = [m.start() for t in terms for m in [re.search(r"\b" + re.escape(t) + r"\b", low)]
            if m]
    if not hits:
        return body[:2 * SNIPPET].strip()
    at = min(hits)
    start, end = max(0, at - SNIPPET), min(len(body), at + SNIPPET)
    return ("…" if start else "") + body[start:end].strip() + ("…" if end < len(body) else "")


def search(store: Store, p: Principal, space_ref: str, q: str | None, limit: int
           ) -> dict[str, Any]:
    """Live entries at the head whose title, tags or body hold every word of ``q``."""
    terms = search_terms(q)
    with indexed(store, p, space_ref) as (conn, space, state, scope):
        if scope.unrestricted:
            total, rows = ri.search_txn(conn, space.id, terms, limit)
        else:  # every hit up to a bound, filtered: the total counts only readable ones
            _, hits = ri.search_txn(conn, space.id, terms, SCOPED_SEARCH_MAX)
            seen = scopes.visible_txn(conn, space.id, scope, [i for i, _, _ in hits])
            kept = [h for h in hits if h[0] in seen]
            total, rows = len(kept), kept[:limit]
    return {"head": _head(*state), "terms": terms, "total": total,
            "results": [{"id": i, "title": t, "snippet": _snippet(b, terms)}
                        for i, t, b in rows]}
