"""The witness's HTTP interface (C2SP tlog-witness, with two reads of our own):

    POST /add-checkpoint   "old <size>\\n<proof, base64 lines>\\n\\n<signed note>"
                           200 the co-signature line; 409 text/x.tlog.size "<size held>";
                           400 malformed or smaller; 403 not signed by the origin's hub key;
                           404 a hub this witness does not serve; 422 the proof fails, or
                           another checkpoint of that size (kept as evidence: 409 after)
    GET  /checkpoint?origin=O   the latest co-signed note for O (gossip, evidence), and the
                           conflicting pair when the hub showed two histories
    POST /release          {"note", "statement", "leaf": {"index", "data", "proof"}}: a
                           fork recovery (D146): the note is a hub-signed checkpoint whose
                           log holds the leaf of a new epoch, the statement its hub-signed
                           statement,
                           carrying the proof of two histories (``forked``); the line
                           starts again there, the
                           conflict is cleared, the statement kept. 200 the co-signature;
                           400 malformed or no proof of a fork, 403 not the hub's
                           signature, 404 a hub not served, 409 taken already
    GET  /                 {name, key}: what an owner adds to a space's policy

    request ──parse──▶ checkpoint (origin = hub key + space) ──hub's signature──▶
      state.decide(held, old, proof) ──▶ keep (compare-and-swap on size) ──▶ co-sign
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from hub.witness.state import Refusal, WitnessState, decide
from shared import merkle, tlog
from shared.canonical import canonical_str
from shared.digest import digest_of, genesis_digest
from shared.errors import QuireError
from shared.signed import EpochStatement, parse_epoch_statement
from shared.signing import public_b64

MAX_BODY = 16 * 1024


@dataclass
class Witness:
    key: Ed25519PrivateKey
    name: str
    state: WitnessState
    hubs: frozenset[str] = field(default_factory=frozenset)  # empty: any hub key
    clock: Callable[[], float] = time.time

    @property
    def public(self) -> str:
        return public_b64(self.key)

    def hub_note(self, text: Any) -> tuple[tlog.Note, tlog.Checkpoint]:
        """A checkpoint note of a hub this witness serves, signed by the key its origin
        names; ``Refusal`` (400, 404, 403) otherwise."""
        try:
            note = tlog.parse_note(text)
            cp = tlog.parse_checkpoint(note.body)
        except ValueError as e:
            raise Refusal(400, f"not a checkpoint: {e}") from None
        if self.hubs and cp.hub_key not in self.hubs:
            raise Refusal(404, "this witness does not serve that hub")
        if not tlog.hub_signed(note, cp.hub_key):
            raise Refusal(403, "the checkpoint is not signed by the hub key its origin names")
        return note, cp

    def add_checkpoint(self, raw: bytes) -> str:
        """The co-signature line, or ``Refusal``."""
        old, proof, note_text = _parse(raw)
        note, cp = self.hub_note(note_text)
        at = int(self.clock())
        with self.state.lock:
            if self.state.conflict(cp.origin) is not None:
                raise Refusal(409, "equivocation: this hub showed two histories of this "
                                   "space; an operator must act (quire witness forget)")
            held = self.state.held(cp.origin)
            try:
                decide(held, old, proof, cp, note.body)
            except Refusal as r:
                if held is not None and r.status == 422 and cp.size == held.size \
                        and cp.root != held.root:  # two hub-signed heads of one size
                    self.state.record_conflict(cp.origin, held.note, note.text(), at)
                raise
            line = tlog.cosign(self.key, self.name, note.body, at)
            kept = tlog.with_lines(note, line).text()  # the hub's signature, and ours
            if not self.state.keep(cp.origin, None if held is None else held.size, cp, kept,
                                   at):
                raise Refusal(409, str((self.state.held(cp.origin) or held).size))  # type: ignore[union-attr]
        return line


    def release(self, doc: Any) -> str:
        """Take a fork recovery (above): the co-signature of its checkpoint, or
        ``Refusal``."""
        if not isinstance(doc, dict):
            raise Refusal(400, "the body is {\"note\", \"statement\", \"leaf\"}")
        note, cp = self.hub_note(doc.get("note"))
        st = recovery_of(doc.get("leaf"), doc.get("statement"), cp)
        at = int(self.clock())
        line = tlog.cosign(self.key, self.name, note.body, at)
        kept = tlog.with_lines(tlog.Note(note.body, ()), line).text()
        if not self.state.release(cp.origin, st.epoch, canonical_str(doc["statement"]), cp,
                                  kept, at):
            raise Refusal(409, "this fork recovery was taken already")
        return line


def recovery_of(leaf: Any, statement: Any, cp: tlog.Checkpoint) -> EpochStatement:
    """The fork recovery a leaf of the checkpoint's log records: a new epoch of its space
    whose statement, signed by the origin's hub key, carries two checkpoints of this very
    log that prove two histories. ``Refusal`` (400) otherwise."""
    try:
        if not (isinstance(leaf, dict) and isinstance(leaf.get("index"), int)
                and 0 <= leaf["index"] < cp.size and isinstance(leaf.get("data"), dict)
                and isinstance(leaf.get("proof"), list) and len(leaf["proof"]) <= 64):
            raise ValueError("the leaf is {index (in the log), data, proof}")
        data = leaf["data"]
        proof = [bytes.fromhex(h) for h in leaf["proof"]]
        merkle.verify_inclusion(tlog.leaf_hash_of(data), leaf["index"], cp.size, proof,
                                cp.root)
        st = parse_epoch_statement(cp.hub_key, statement, space=cp.space)
        if not tlog.leaf_at_head(data, epoch=st.epoch, seq=0,
                                 head=genesis_digest(cp.space, st.epoch)) \
                or data.get("statement") != digest_of(statement):
            raise ValueError("the last leaf is not the new epoch's")
        if st.forked is None:
            raise ValueError("the new epoch is not a fork recovery")
        tlog.equivocation(*st.forked)
        if tlog.parse_checkpoint(tlog.parse_note(st.forked[0]).body).origin != cp.origin:
            raise ValueError("the evidence is of another log")
    except (ValueError, TypeError, merkle.ProofError, QuireError) as e:
        raise Refusal(400, f"not a fork recovery of this log: {e}") from None
    return st


def _parse(raw: bytes) -> tuple[int, list[bytes], str]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Refusal(400, "not UTF-8") from None
    head, sep, note = text.partition("\n\n")
    lines = head.split("\n")
    if not sep or not lines[0].startswith("old ") or not lines[0][4:].isdigit() \
            or len(lines) > 65:
        raise Refusal(400, "the body is 'old <size>', proof lines, a blank line, the note")
    try:
        proof = [base64.b64decode(x, validate=True) for x in lines[1:]]
    except ValueError:
        raise Refusal(400, "a proof line is not base64") from None
    if any(len(h) != 32 for h in proof):
        raise Refusal(400, "a proof hash is 32 bytes")
    return int(lines[0][4:]), proof, note


def create_app(witness: Witness) -> Starlette:
    async def add(request: Request) -> Response:
        raw = await request.body()
        if len(raw) > MAX_BODY:
            return PlainTextResponse("too large\n", status_code=413)
        try:
            return PlainTextResponse(witness.add_checkpoint(raw))
        except Refusal as r:
            media = "text/x.tlog.size" if r.status == 409 and r.message.isdigit() \
                else "text/plain"
            return PlainTextResponse(r.message + "\n", status_code=r.status, media_type=media)

    async def checkpoint(request: Request) -> Response:
        origin = request.query_params.get("origin", "")
        held = witness.state.held(origin)
        conflict = witness.state.conflict(origin)
        if held is None and conflict is None:
            return JSONResponse({"error": "unknown origin"}, status_code=404)
        doc: dict[str, Any] = {"note": None if held is None else held.note}
        if conflict is not None:
            doc["equivocation"] = {"kept": conflict[0], "other": conflict[1]}
        return JSONResponse(doc)

    async def release(request: Request) -> Response:
        raw = await request.body()
        if len(raw) > MAX_BODY:
            return PlainTextResponse("too large\n", status_code=413)
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        try:
            return PlainTextResponse(witness.release(doc))
        except Refusal as r:
            return PlainTextResponse(r.message + "\n", status_code=r.status)

    async def info(request: Request) -> Response:
        return JSONResponse({"name": witness.name, "key": witness.public})

    return Starlette(routes=[Route("/add-checkpoint", add, methods=["POST"]),
                             Route("/release", release, methods=["POST"]),
                             Route("/checkpoint", checkpoint, methods=["GET"]),
                             Route("/", info, methods=["GET"])])


def open_witness(data: Path, name: str | None = None, hubs: frozenset[str] = frozenset()
                 ) -> Witness:
    """The witness of a data folder: its key (made on first use, mode 0600) and state."""
    from shared.signing import key_id, load_private, new_private_key, save_private

    data.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = data / "witness.key"
    if not path.exists():
        save_private(new_private_key(), path)
    key = load_private(path)
    return Witness(key, name or f"quire-witness/{key_id(public_b64(key))}",
                   WitnessState(data / "witness.db"), hubs)
