"""A small in-memory hub speaking docs/protocol.md, for fast in-process replica tests
(property tests, hostile doubles). Served through ``httpx2.MockTransport``.

It implements only what sync needs (head, changes, snapshot, batches, receipts, epoch), with
the same guard order as the real hub: replay check, then epoch, parent, bases.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2

from shared import signed
from shared.canonical import dumps
from shared.digest import chain_next, genesis_digest
from shared.entry import Entry
from shared.errors import (
    BaseMismatch,
    BatchConflict,
    EpochChanged,
    HeadChanged,
    NotFound,
    QuireError,
    SnapshotRequired,
)
from shared.ids import new_id
from shared.signing import new_private_key, public_b64
from shared.state import root_of_entries
from shared.wire import parse_batch, receipt_body, sign_receipt


class FakeHub:
    def __init__(self) -> None:
        self.key = new_private_key()
        self.public_key = public_b64(self.key)
        self.space_id = new_id()
        self.name = "team"
        self.epoch = new_id()
        self.seq = 0
        self.digest = genesis_digest(self.space_id, self.epoch)
        self.entries: dict[str, Entry] = {}  # current, tombstones included
        self.log: list[dict[str, Any]] = []  # changes lines of the current epoch
        self.receipts: dict[tuple[str, str], dict[str, Any]] = {}
        self.batches: list[dict[str, Any]] = []  # every accepted batch, all epochs
        self.fail_next: list[Any] = []  # hooks (request) -> Response | None; fire once
        self.clock = 1_700_000_000_000

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self.handle)

    def bump_epoch(self) -> None:
        self.epoch = new_id()
        self.seq = 0
        self.digest = genesis_digest(self.space_id, self.epoch)
        self.log = []

    def live(self) -> dict[str, Entry]:
        return {k: v for k, v in self.entries.items() if not v.deleted}

    # ------------------------------------------------------------ HTTP

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        for hook in list(self.fail_next):
            # a hook fires once: when it answers (or raises) it is removed
            try:
                res = hook(request)
            except Exception:
                self.fail_next.remove(hook)
                raise
            if res is not None:
                self.fail_next.remove(hook)
                return res
        try:
            return self._route(request)
        except QuireError as e:
            return httpx2.Response(e.status, json=e.to_wire())

    def _route(self, request: httpx2.Request) -> httpx2.Response:
        parts = request.url.path.strip("/").split("/")
        if parts[:2] != ["v1", "spaces"] or len(parts) < 4 or parts[2] not in (
                self.space_id, self.name):
            raise NotFound("no such route")
        what = parts[3]
        if what == "head" and request.method == "GET":
            body = signed.head_body(space=self.space_id, epoch=self.epoch, seq=self.seq,
                                    digest=self.digest, at=self.clock,
                                    state=root_of_entries((k, v.version)
                                                          for k, v in self.live().items()))
            return httpx2.Response(200, json=dict(signed.sign_head(self.key, body),
                                                  name=self.name, role="editor", rules=[]))
        if what == "changes":
            q = request.url.params
            after = int(q.get("after", "0"))
            if q.get("epoch") != self.epoch or after > self.seq:
                raise SnapshotRequired("take a snapshot")
            limit = int(q.get("limit", "500"))
            lines = [x for x in self.log if x["seq"] > after][:limit]
            last = lines[-1]["seq"] if lines else after
            lines = lines + [{"end": {"seq": last, "head_seq": self.seq,
                                      "more": last < self.seq}}]
            return self._ndjson(lines)
        if what == "snapshot":
            lines: list[dict[str, Any]] = [{"head": {"space": self.space_id, "epoch": self.epoch,
                                                     "seq": self.seq, "digest": self.digest}}]
            for eid in sorted(self.live()):
                e = self.entries[eid]
                lines.append({"entry": e.to_dict(), "version": e.version, "seq": self.seq})
            lines.append({"end": {"count": len(lines) - 1}})
            return self._ndjson(lines)
        if what == "batches" and request.method == "POST":
            return self._publish(json.loads(request.content))
        if what == "receipts":
            r = self.receipts.get((parts[4], parts[5]))
            if r is None:
                raise NotFound("no such receipt")
            return httpx2.Response(200, json={"receipt": r})
        raise NotFound("no such route")

    def _ndjson(self, lines: list[dict[str, Any]]) -> httpx2.Response:
        return httpx2.Response(200, content="".join(dumps(x) + "\n" for x in lines).encode(),
                               headers={"content-type": "application/x-ndjson"})

    def _publish(self, raw: dict[str, Any]) -> httpx2.Response:
        batch = parse_batch(raw)
        key = (batch.replica_id, batch.batch_id)
        if key in self.receipts:
            r = self.receipts[key]
            if r["batch_digest"] != batch.digest:
                raise BatchConflict("same batch id, other content")
            return httpx2.Response(200, json={"receipt": r, "replayed": True})
        if batch.epoch != self.epoch:
            raise EpochChanged("other epoch")
        if (batch.parent_seq, batch.parent_digest) != (self.seq, self.digest):
            raise HeadChanged("parent is not the head")
        for op in batch.ops:
            cur = self.entries.get(op.entry_id)
            cur_v = None if cur is None else cur.version
            ok = op.base == cur_v or (op.base is None and (cur is None or cur.deleted))
            if not ok:
                raise BaseMismatch(f"base of {op.entry_id} is not current")
        for op in batch.ops:
            self.entries[op.entry_id] = op.entry
        self.seq += 1
        self.digest = chain_next(self.digest, batch.digest)
        self.clock += 1
        receipt = sign_receipt(self.key, receipt_body(
            space=self.space_id, batch_id=batch.batch_id, replica_id=batch.replica_id,
            seq=self.seq, head=self.digest, epoch=self.epoch, accepted_at=self.clock,
            digest=batch.digest))
        self.receipts[key] = receipt
        self.batches.append(raw)
        self.log.append({"batch": raw, "seq": self.seq, "head": self.digest,
                         "accepted_at": self.clock,
                         "author": {"user": "u", "device": "d", "agent": None}})
        return httpx2.Response(200, json={"receipt": receipt, "replayed": False})
