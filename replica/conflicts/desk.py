"""Conflict packets, claims and resolutions (docs/agents.md): the work item an agent picks up when
two members changed the same entry in ways the merge cannot settle.

Packets and resolutions themselves are pure functions in ``replica/conflicts/packets.py``. Here:

- ``Desk``: one joined space's conflicts on disk. Claims live in their own SQLite file
  (``claims.sqlite`` next to the store) so a claim never races a sync's transactions; every
  claim change runs in ``BEGIN IMMEDIATE``, so several agents, the watcher and the CLI may
  claim at once and exactly one wins;
- a resolution is computed on a copy (values) and switched in with one store transaction,
  under the space lock, after re-checking the packet digest and the claim: a SIGKILL before
  the commit leaves the packet as it was, after it the vault write is journaled (the vault
  file is replaced atomically, never half written).

A packet id names one state of a conflict: it changes whenever base, ours or theirs change,
so a resolution made against an old read is refused with ``packet_stale`` and the fresh id.
The next sync publishes a resolution in its own batch (``plan_batch`` in
``replica/engine/resolutions.py``, called by the sync engine): the device's sync one made at
the CLI, only the agent's own sync one an MCP session made (its provenance then names the
agent, as the hub checks against the delegation it comes with).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replica.conflicts import siblings
from replica.conflicts.packets import (
    DEFAULT_TTL_S,
    HOW,
    MAX_INLINE_BYTES,
    MAX_TTL_S,
    MIN_TTL_S,
    build_packet,
    conflict_kind,
    entry_from_vault_text,
    merged_from_json,
    packet_digest,
    packet_id_of,
    packet_page,
    resolve_entries,
    stakes,
    with_current_ours,
)
from replica.engine.crash import crash_point
from replica.engine.ledger import Ledger
from replica.engine.merge import live
from replica.engine.push import Publisher
from replica.engine.report import SyncReport
from replica.engine.resolutions import forget_resolutions_txn, plan_batch
from replica.engine.scan import fold_vault
from replica.machine.home import SpaceConfig, space_lock
from replica.store import store as st
from replica.store.db import Conn, Database
from replica.store.store import Conflict, EntryState, Store
from shared import policy
from shared.entry import Entry, tombstone
from shared.errors import (
    ClaimHeld,
    InvalidRequest,
    NotFound,
    PacketStale,
    PolicyDenied,
    QuireError,
)
from shared.ids import is_agent_name, is_entry_id
from shared.wire import Op

__all__ = ["Desk", "Principal", "entry_from_vault_text", "merged_from_json", "plan_batch",
           "forget_resolutions_txn", "packet_digest", "packet_id_of", "with_current_ours"]



def now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------- the desk (I/O)


def open_conflicts_txn(conn: Conn) -> list[Conflict]:
    ids = conn.column("SELECT entry_id FROM conflicts ORDER BY entry_id")
    out = []
    for eid in ids:
        c = st.get_conflict_txn(conn, eid)
        if c is not None:
            out.append(with_current_ours(c, st.get_state_txn(conn, eid).local))
    return out


CLAIMS_DDL = (
    """CREATE TABLE IF NOT EXISTS claims (
	entry_id VARCHAR(300) NOT NULL,
	token VARCHAR(64) NOT NULL,
	agent VARCHAR(200) NOT NULL,
	packet_id VARCHAR(40) NOT NULL,
	acquired_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,
	PRIMARY KEY (entry_id)
)""",
    # the MCP session that took a claim: its re-claim gets the same one
    """CREATE TABLE IF NOT EXISTS claim_sessions (
	entry_id VARCHAR(300) NOT NULL,
	session VARCHAR(200) NOT NULL,
	token VARCHAR(64) NOT NULL,
	PRIMARY KEY (entry_id)
)""",
    # packet ids handed out, so an old id can be answered with the fresh one
    """CREATE TABLE IF NOT EXISTS packets (
	packet_id VARCHAR(40) NOT NULL,
	entry_id VARCHAR(300) NOT NULL,
	seen_at BIGINT NOT NULL,
	PRIMARY KEY (packet_id)
)""",
)


def immediate_db(path: Path) -> Database:
    """A database whose transactions start with BEGIN IMMEDIATE: the write lock is taken
    before the first read, so read-check-write sequences are safe across processes."""
    return Database(path, ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                           "PRAGMA busy_timeout=15000"), immediate=True)


@dataclass
class Principal:
    """Who resolves locally: this device's user, its role and rules from the last head."""

    user_id: str | None = None
    device_id: str | None = None


class Desk:
    """The conflicts of one joined space. Cheap to create; ``close()`` when done."""

    def __init__(self, space: SpaceConfig, *, clock: Callable[[], int] = now_ms,
                 principal: Principal | None = None):
        self.space = space
        self.clock = clock
        self.principal = principal or Principal()
        # an agent's desk (an MCP session) judges its resolutions by the role and rules
        # its own head brought (replica/engine/agent_push.py ``access_key``), never by the
        # device's; before the first such head, by the role its delegation gives
        self.access_key = "access"
        self.default_role: str | None = space.role
        # the one call a stale packet's error points to, in the caller's own terms (an MCP
        # session names its tool)
        self.show_call = "quire conflicts show {packet}"
        # an MCP session's desk: its agent (whom its resolutions are judged as) and the
        # highest role its delegation allows (a read-only one: viewer)
        self.agent: str | None = None
        self.role_cap: str | None = None
        self.store = Store(space.store_path)
        self._store_engine = immediate_db(space.store_path)
        self._claims_engine = immediate_db(space.dir / "claims.sqlite")
        with self._claims_engine.begin() as conn:
            for ddl in CLAIMS_DDL:
                conn.execute(ddl)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Desk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _claims_tx(self) -> Iterator[Conn]:
        with self._claims_engine.begin() as conn:
            yield conn

    # ------------------------------------------------------------ reading

    def advice(self, packet_id: str) -> str:
        """What to do about a stale packet: show the fresh one, then resolve with its
        digest (your claim stays valid)."""
        return (f"show it again with {self.show_call.format(packet=packet_id)} and resolve "
                "with its digest")

    def _claim_doc(self, conn: Conn, entry_id: str) -> dict[str, Any] | None:
        r = conn.execute("SELECT * FROM claims WHERE entry_id = ?", (entry_id,)).fetchone()
        if r is None or r.expires_at <= self.clock():
            return None
        return {"agent": r.agent, "expires_at": r.expires_at}

    def _remember_txn(self, conn: Conn, packet_id: str, entry_id: str) -> None:
        conn.execute("INSERT OR IGNORE INTO packets (packet_id, entry_id, seen_at)"
                     " VALUES (?, ?, ?)", (packet_id, entry_id, self.clock()))

    def _authors(self, c: Conflict) -> tuple[dict[str, Any] | None, int | None,
                                             dict[str, Any], dict[int, int]]:
        """(base's author, base's seq, ours' author, {seq: accepted at} of base and
        theirs) from the history this replica applied."""
        me = {"user": self.principal.user_id, "device": self.principal.device_id,
              "agent": None, "replica": "this replica"}
        base_author, base_seq = None, None
        times: dict[int, int] = {}
        for row in reversed(self.store.history()):
            if c.entry_id not in json.loads(row["entries"]):
                continue
            if c.theirs_seq is not None and row["seq"] >= c.theirs_seq:
                if row["seq"] == c.theirs_seq and row.get("accepted_at"):
                    times[row["seq"]] = int(row["accepted_at"])
                continue
            base_seq = row["seq"]
            if row.get("accepted_at"):
                times[row["seq"]] = int(row["accepted_at"])
            if row["kind"] == "push":
                base_author = me
            elif row["author"]:
                base_author = json.loads(row["author"])
            break
        return base_author, base_seq, me, times

    def people(self) -> dict[str, str]:
        """The members' display names this replica knows, by user id: kept by ``quire
        log`` and syncs (meta ``people``) and by MCP sessions (``agent_people``)."""
        out: dict[str, str] = {}
        for key in ("agent_people", siblings.PEOPLE):
            got = self.store.get_meta(key)
            if isinstance(got, dict):
                out.update({str(k): str(v) for k, v in got.items()})
        return out

    def named(self, author: dict[str, Any] | None, people: dict[str, str]
              ) -> dict[str, Any] | None:
        """``author`` with the member's display name beside the ids (``name``: ``you`` for
        this member when the hub has not said it, None when not known)."""
        if not author:
            return author
        user = author.get("user")
        name = people.get(user) if isinstance(user, str) else None
        if name is None and (author.get("replica") == "this replica"
                             or (user is not None and user == self.principal.user_id)):
            name = "you"
        return dict(author, name=name)

    def _packet(self, c: Conflict, claim: dict[str, Any] | None,
                inline: int = MAX_INLINE_BYTES, page_fields: bool = False) -> dict[str, Any]:
        base_author, base_seq, me, times = self._authors(c)
        people = self.people()
        pkt = build_packet(c, base_author=self.named(base_author, people), base_seq=base_seq,
                           ours_author=self.named(me, people), claim=claim, inline=inline,
                           page_fields=page_fields, stakes_doc=self.stakes(c))
        # who made theirs, by name; when base and theirs were accepted (UTC ms)
        pkt["theirs"]["author"] = self.named(pkt["theirs"]["author"], people)
        for side in ("base", "theirs"):
            seq = pkt[side].get("seq")
            pkt[side]["at"] = times.get(seq) if isinstance(seq, int) else None
        return pkt

    def stakes(self, c: Conflict) -> dict[str, Any] | None:
        """``packets.stakes`` (what each side does to the guardrail since the base) and,
        for each side, whether taking it would be published: judged as its publication
        will be (``judge_txn``), so the model sees which answer goes through."""
        doc = stakes(c)
        if doc is None:
            return None
        with self.store.engine.connect() as conn:
            for side, e in (("ours", c.ours), ("theirs", c.theirs)):
                hits = self.judge_txn(conn, {c.entry_id: live(e)})
                doc[side]["publishable"] = not hits
                doc[side]["refused"] = hits[0] if hits else None
        doc["publishable"] = [side for side in ("ours", "theirs") if doc[side]["publishable"]]
        doc["notice"] = (
            "publishable lists the sides your rules let you publish, judged against the "
            "hub's version (theirs) as the hub will judge it: a resolution that lowers the "
            "severity, changes the text or deletes the guardrail weakens it and is refused "
            "before anything changes unless the space rules let you (by default only "
            "admins); a merged entry is judged the same way when you resolve")
        return doc

    def open_conflicts(self) -> list[Conflict]:
        with self.store.engine.connect() as conn:
            return open_conflicts_txn(conn)

    def list_packets(self) -> list[dict[str, Any]]:
        """A short line per open packet (read the full packet with ``show``)."""
        out = []
        conflicts = self.open_conflicts()
        people = self.people()
        with self._claims_tx() as conn:
            for c in conflicts:
                digest = packet_digest(c)
                pid = packet_id_of(digest)
                self._remember_txn(conn, pid, c.entry_id)
                out.append({"packet_id": pid, "digest": digest, "entry": c.entry_id,
                            "kind": conflict_kind(c), "fields": list(c.fields),
                            "theirs_author": self.named(c.theirs_author, people),
                            "theirs_seq": c.theirs_seq,
                            "claim": self._claim_doc(conn, c.entry_id),
                            "created_at": c.created_at})
        return out

    def _locate(self, ref: str) -> Conflict:
        """The open conflict a packet id or entry id names; stale ids raise ``packet_stale``."""
        if not isinstance(ref, str) or not ref:
            raise InvalidRequest("give a packet id (pk-…) or an entry id")
        if is_entry_id(ref):  # one entry: load only its conflict (candidates may be large)
            with self.store.engine.connect() as conn:
                one = st.get_conflict_txn(conn, ref)
                if one is not None:
                    return with_current_ours(one, st.get_state_txn(conn, ref).local)
        if ref.startswith("pk-"):  # a packet id handed out: load only its entry's conflict
            with self._claims_tx() as cconn:
                row = cconn.execute("SELECT entry_id FROM packets WHERE packet_id = ?",
                                    (ref,)).fetchone()
            if row is not None:
                with self.store.engine.connect() as conn:
                    one = st.get_conflict_txn(conn, row[0])
                    if one is not None:
                        one = with_current_ours(one, st.get_state_txn(conn, row[0]).local)
                        if packet_id_of(packet_digest(one)) == ref:
                            return one
        conflicts = self.open_conflicts()
        for c in conflicts:
            if ref == c.entry_id:
                return c
        for c in conflicts:
            if ref == packet_id_of(packet_digest(c)):
                return c
        entry_id = None
        if ref.startswith("pk-"):
            with self._claims_tx() as conn:
                r = conn.execute("SELECT entry_id FROM packets WHERE packet_id = ?",
                                 (ref,)).fetchone()
            entry_id = r[0] if r else None
        if entry_id is not None:
            for c in conflicts:
                if c.entry_id == entry_id:
                    fresh = packet_digest(c)
                    raise PacketStale(
                        f"packet {ref} is stale: {entry_id} changed since it was read "
                        "(a new remote version or a local edit); "
                        + self.advice(packet_id_of(fresh)),
                        {"packet_id": packet_id_of(fresh), "digest": fresh,
                         "entry": entry_id, "stale": ref})
            raise NotFound(f"packet {ref} is closed: {entry_id} is no longer in conflict",
                           {"entry": entry_id, "resolved": True})
        raise NotFound(f"no open conflict packet {ref!r}",
                       {"open": [packet_id_of(packet_digest(c)) for c in conflicts][:20]})

    def show(self, ref: str, page: int | None = None, inline: int = MAX_INLINE_BYTES,
             page_fields: bool = False) -> dict[str, Any]:
        """The packet, bodies longer than ``inline`` bytes paged, and with ``page_fields``
        every side's other fields (``page``: one page)."""
        c = self._locate(ref)
        if page is not None:
            if not isinstance(page, int) or page < 1:
                raise InvalidRequest("page numbers start at 1")
            return packet_page(c, page, inline, page_fields)
        with self._claims_tx() as conn:
            claim = self._claim_doc(conn, c.entry_id)
            pkt = self._packet(c, claim, inline, page_fields)
            self._remember_txn(conn, pkt["packet_id"], c.entry_id)
        return pkt

    # ------------------------------------------------------------ claims

    @staticmethod
    def _ttl(ttl: int | None) -> int:
        ttl = DEFAULT_TTL_S if ttl is None else ttl
        if isinstance(ttl, bool) or not isinstance(ttl, int) or not (
                MIN_TTL_S <= ttl <= MAX_TTL_S):
            raise InvalidRequest(f"ttl must be whole seconds from {MIN_TTL_S} to {MAX_TTL_S}")
        return ttl

    def claim(self, ref: str, agent: str, ttl: int | None = None,
              session: str | None = None) -> dict[str, Any]:
        """Take the lease on a packet; refused with ``claim_held`` while another lease lives.
        The same agent claiming again in the same ``session`` gets its live claim back
        (token included, lease extended): a lost token is never held against its owner."""
        if not is_agent_name(agent):
            raise InvalidRequest(f"invalid agent name {agent!r}")
        ttl_s = self._ttl(ttl)
        c = self._locate(ref)
        pid = packet_id_of(packet_digest(c))
        with self._claims_tx() as conn:
            now = self.clock()
            r = conn.execute("SELECT * FROM claims WHERE entry_id = ?",
                             (c.entry_id,)).fetchone()
            mine = r is not None and session is not None and r.agent == agent and conn.scalar(
                "SELECT session FROM claim_sessions WHERE entry_id = ? AND token = ?",
                (c.entry_id, r.token)) == session
            if r is not None and r.expires_at > now and mine:
                expires = max(r.expires_at, now + ttl_s * 1000)
                conn.execute("UPDATE claims SET expires_at = ? WHERE entry_id = ?",
                             (expires, c.entry_id))
                return {"packet_id": pid, "entry": c.entry_id, "agent": agent,
                        "token": r.token, "expires_at": expires, "ttl": ttl_s,
                        "reclaimed": True}
            if r is not None and r.expires_at > now:
                raise ClaimHeld(f"packet {pid} is claimed by {r.agent} until {r.expires_at}",
                                {"holder": r.agent, "expires_at": r.expires_at,
                                 "packet_id": pid})
            token = new_claim_token()
            conn.execute("INSERT OR REPLACE INTO claims (entry_id, token, agent, packet_id,"
                         " acquired_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                         (c.entry_id, token, agent, pid, now, now + ttl_s * 1000))
            conn.execute("DELETE FROM claim_sessions WHERE entry_id = ?", (c.entry_id,))
            if session is not None:
                conn.execute("INSERT INTO claim_sessions (entry_id, session, token)"
                             " VALUES (?, ?, ?)", (c.entry_id, session, token))
            self._remember_txn(conn, pid, c.entry_id)
        return {"packet_id": pid, "entry": c.entry_id, "agent": agent, "token": token,
                "expires_at": now + ttl_s * 1000, "ttl": ttl_s}

    def _own_claim_txn(self, conn: Conn, c: Conflict, token: str) -> Any:
        r = conn.execute("SELECT * FROM claims WHERE entry_id = ?", (c.entry_id,)).fetchone()
        if r is None or not secrets.compare_digest(r.token, token or ""):
            if r is not None and r.expires_at > self.clock():
                raise ClaimHeld(f"packet is claimed by {r.agent} with another token",
                                {"holder": r.agent, "expires_at": r.expires_at})
            raise InvalidRequest("no claim with this token (expired and taken, or released)")
        return r

    def renew(self, ref: str, token: str, ttl: int | None = None) -> dict[str, Any]:
        ttl_s = self._ttl(ttl)
        c = self._locate(ref)
        with self._claims_tx() as conn:
            r = self._own_claim_txn(conn, c, token)
            expires = self.clock() + ttl_s * 1000
            conn.execute("UPDATE claims SET expires_at = ? WHERE entry_id = ?",
                         (expires, c.entry_id))
        return {"packet_id": packet_id_of(packet_digest(c)), "entry": c.entry_id,
                "agent": r.agent, "token": token, "expires_at": expires, "ttl": ttl_s}

    def release(self, ref: str, token: str) -> dict[str, Any]:
        c = self._locate(ref)
        with self._claims_tx() as conn:
            self._own_claim_txn(conn, c, token)
            conn.execute("DELETE FROM claims WHERE entry_id = ?", (c.entry_id,))
        return {"packet_id": packet_id_of(packet_digest(c)), "entry": c.entry_id,
                "released": True}

    # ------------------------------------------------------------ resolving

    def resolve(self, ref: str, *, digest: str | None, how: str, token: str | None = None,
                merged: Entry | None = None, agent: str | None = None,
                as_agent: bool = False) -> dict[str, Any]:
        """Apply a resolution. Refused with ``packet_stale`` when the packet's inputs changed
        since ``digest`` was read (``digest`` None: the packet as it is now, read under the
        lock after the vault's edits are folded in: a person at the CLI who looked at the
        page; an agent quotes the digest it read), ``claim_held`` when another agent holds
        the lease, and
        ``policy_denied`` when it would weaken a guardrail the space rules protect.
        ``as_agent``: made by ``agent``'s MCP session (an agent principal): only that
        agent's own sync publishes it (replica/engine/resolutions.py ``agent_owned``)."""
        if how not in HOW:
            raise InvalidRequest(f"unknown resolution {how!r}; one of {', '.join(HOW)}")
        if agent is not None and not is_agent_name(agent):
            raise InvalidRequest(f"invalid agent name {agent!r}")
        if digest is not None and (not isinstance(digest, str) or not digest):
            raise InvalidRequest("name the packet digest you resolved (from show)")
        with space_lock(self.space, wait=True):
            # a local edit since the packet was read makes it stale
            ledger = self.fold_vault_edits()
            c = self._locate(ref)
            # every problem is named at once (a stale digest and a bad token both)
            problems = []
            fresh = packet_digest(c)
            digest = fresh if digest is None else digest
            if fresh != digest:
                problems.append({"code": "packet_stale", "message": (
                    f"the digest is not {c.entry_id}'s current packet (a new remote version or "
                    f"a local edit); {self.advice(packet_id_of(fresh))}"),
                    "packet_id": packet_id_of(fresh), "digest": fresh, "entry": c.entry_id})
            with self._claims_tx() as cconn:
                r = cconn.execute("SELECT * FROM claims WHERE entry_id = ?",
                                  (c.entry_id,)).fetchone()
                live_claim = r is not None and r.expires_at > self.clock()
                if r is not None and (live_claim or token):
                    if token is None:
                        problems.insert(0, {"code": "claim_held", "message": (
                            f"packet is claimed by {r.agent} until {r.expires_at}; resolve "
                            "with its claim token"), "holder": r.agent,
                            "expires_at": r.expires_at})
                    elif not secrets.compare_digest(r.token, token):
                        problems.insert(0, {"code": "claim_held", "message": (
                            f"packet is claimed by {r.agent} with another token"),
                            "holder": r.agent, "expires_at": r.expires_at} if live_claim else {
                            "code": "invalid_request", "message": "no claim with this token "
                            "(expired and taken, or released)"})
                    else:
                        agent = agent or r.agent
                elif token:
                    problems.insert(0, {"code": "invalid_request", "message": (
                        "no claim with this token (expired and taken, or released)")})
                if problems:
                    raise _problems_error(problems)
                result = self._apply(ledger, c, digest=digest, how=how, merged=merged,
                                     agent=agent, as_agent=as_agent)
                cconn.execute("DELETE FROM claims WHERE entry_id = ?", (c.entry_id,))
            crash_point("resolve_before_vault_write")
            ledger.flush_vault()
            siblings.after_sync(self.space.vault, self.store)  # its copy of theirs goes
        return result

    def fold_vault_edits(self) -> Ledger:
        """Fold the vault's edits into the store, without the hub (the caller holds the space
        lock): journaled vault writes first (a file not yet written, a keep-both copy say,
        would otherwise look like a local delete), then the scan. Returns the ledger the
        desk's own decisions then go through."""
        ledger = Ledger(self.space.vault, self.store, self.clock)
        ledger.flush_vault()
        fold_vault(ledger, SyncReport())
        return ledger

    def _access(self) -> tuple[str | None, list[dict[str, Any]]]:
        """The role and the applying rules the hub's head last gave the publisher; before
        its first head, the role its scope gives and the typed defaults that apply to it
        (the hub's own, shared/policy.py ``DEFAULT_RULES``)."""
        access = self.store.get_meta(self.access_key) or {}
        role = access.get("role", self.default_role)
        if self.role_cap is not None and policy.role_rank(role) > policy.role_rank(
                self.role_cap):
            role = self.role_cap
        if "rules" in access:
            return role, list(access.get("rules") or [])
        actor = policy.Actor("", role, self.agent)
        return role, [r.to_dict() for r in policy.effective_rules([])
                      if policy.rule_applies(r, actor)]

    def judge_txn(self, conn: Conn, results: dict[str, Entry | None]
                  ) -> list[dict[str, Any]]:
        """What of ``results`` (entry id -> what a resolution makes of it; None: deleted)
        its publisher's sync would keep back: the same typed checks as every publication
        (replica/engine/push.py ``Publisher.local_denial``: the role, the rules, a
        guardrail weakened against the hub's version, a key taken over), with the
        publisher's role and rules. Empty: it would all go out."""
        role, rules = self._access()
        access: dict[str, Any] = {"role": role, "rules": rules}
        kinds = (self.store.get_meta(self.access_key) or {}).get("kinds")
        if kinds:  # the space's folder mapping, as the head gave it (D152)
            access["kinds"] = kinds
        guardrails: dict[str, Entry] | None = None

        def synced_guardrails() -> dict[str, Entry]:
            nonlocal guardrails
            if guardrails is None:
                guardrails = st.synced_guardrails_txn(conn)
            return guardrails

        out = []
        for eid, made in results.items():
            s = st.get_state_txn(conn, eid)
            if made is None and live(s.synced) is None:
                continue  # deleting what the hub does not have: nothing to publish
            after = made if made is not None else tombstone(eid)
            base = s.synced.version if s.synced is not None else None
            hit = Publisher.local_denial(access, EntryState(eid, s.synced, after),
                                         Op(after, base), synced_guardrails)
            if hit is not None:
                out.append(hit)
        return out

    def _apply(self, ledger: Ledger, c0: Conflict, *, digest: str, how: str,
               merged: Entry | None, agent: str | None,
               as_agent: bool = False) -> dict[str, Any]:
        with self._store_engine.begin() as conn:
            c = st.get_conflict_txn(conn, c0.entry_id)
            if c is None:
                raise NotFound(f"{c0.entry_id} is no longer in conflict", {"entry": c0.entry_id})
            c = with_current_ours(c, st.get_state_txn(conn, c.entry_id).local)
            fresh = packet_digest(c)
            if fresh != digest:
                raise PacketStale(
                    f"the packet for {c.entry_id} changed since it was read (a new remote "
                    f"version or a local edit); {self.advice(packet_id_of(fresh))}",
                    {"packet_id": packet_id_of(fresh), "digest": fresh, "entry": c.entry_id})
            results = resolve_entries(c, how, merged)
            # judged before anything changes, as the hub will judge its publisher: the
            # agent's own sync for a session's resolution (``as_agent``), the device for one
            # made at the CLI, whose --agent is a label only
            denied = self.judge_txn(conn, results)
            if denied:
                first = denied[0]
                raise PolicyDenied(
                    "this resolution would not be published, so nothing was changed: "
                    f"{first.get('reason') or first.get('message')} (the packet's stakes "
                    "say which side publishes)", {"denied": denied})
            for eid in results:
                if eid != c.entry_id and st.get_state_txn(conn, eid).local is not None:
                    raise InvalidRequest(f"keep_both target {eid} already exists")
            crash_point("resolve_before_commit")
            res = st.get_meta_txn(conn, "resolutions", {}) or {}
            pid = packet_id_of(fresh)
            for eid, entry in results.items():
                s = st.get_state_txn(conn, eid)
                if eid == c.entry_id:
                    s.held = False
                    st.drop_conflict_txn(conn, eid)
                s.local = entry
                ledger.schedule_write_txn(conn, s)
                st.put_state_txn(conn, s)
                if s.dirty:
                    res[eid] = {"agent": agent, "packet_id": pid, "how": how,
                                "at": self.clock(),
                                "version": (entry or tombstone(eid)).version,
                                "principal": "agent" if as_agent and agent else "device"}
            st.set_meta_txn(conn, "resolutions", res)
        return {"packet_id": pid, "entry": c.entry_id, "resolved": how, "agent": agent,
                "entries": {eid: (None if e is None else e.version) for eid, e in
                            results.items()},
                "publish": "on the next sync" if any(e in res for e in results) else
                "nothing to publish (the result equals the hub's version)"}


def new_claim_token() -> str:
    """A claim's token: 24 random bytes, URL-safe, never starting with ``-`` (one in 64
    would, and ``--claim -x…`` reads as two options; replica/cli/main.py takes an older one
    in either form)."""
    while True:
        token = secrets.token_urlsafe(24)
        if not token.startswith("-"):
            return token


def _problems_error(problems: list[dict[str, Any]]) -> QuireError:
    """One error naming every problem: the first decides the code; ``details.problems``
    lists them all (each with its code and message)."""
    cls = {"claim_held": ClaimHeld, "packet_stale": PacketStale}.get(problems[0]["code"],
                                                                    InvalidRequest)
    details: dict[str, Any] = {}
    for p in reversed(problems):
        details.update({k: v for k, v in p.items() if k not in ("code", "message")})
    details["problems"] = problems
    return cls("; ".join(p["message"] for p in problems), details)
