"""What a witness remembers and decides (pure decisions, one SQLite file).

    checkpoints  origin → the latest checkpoint it co-signed (size, root, body, note)
                 one line per origin, i.e. per (hub key, space): shared/tlog.py
    conflicts    origin → two hub-signed checkpoints of one size with different roots: the
                 hub showed two histories; nothing more is co-signed for that origin until
                 its operator forgets it (``quire witness forget``) or the hub's owner
                 recovers the space (``release``)
    releases     origin, epoch → the hub-signed fork recovery the line was taken from
                 (each taken once: a replay cannot set the line back)

``decide`` is the whole policy (C2SP tlog-witness): the request's ``old`` must be the size
held (else 409 with it); a smaller checkpoint is refused; the proof must lead from the held
root to the new one; one size has one checkpoint. Only then is the new one kept, under a
compare-and-swap on the size held, and co-signed.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from shared import merkle, tlog

SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (origin TEXT PRIMARY KEY, size INTEGER NOT NULL,
    root BLOB NOT NULL, body TEXT NOT NULL, note TEXT NOT NULL, at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS conflicts (origin TEXT PRIMARY KEY, kept TEXT NOT NULL,
    other TEXT NOT NULL, at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS releases (origin TEXT NOT NULL, epoch TEXT NOT NULL,
    statement TEXT NOT NULL, note TEXT NOT NULL, at INTEGER NOT NULL,
    PRIMARY KEY (origin, epoch));
"""


@dataclass(frozen=True)
class Held:
    size: int
    root: bytes
    body: str
    note: str


@dataclass
class Refusal(Exception):
    status: int  # 400 malformed or smaller, 403 signature, 404 unknown hub, 409 size, 422 proof
    message: str


def decide(held: Held | None, old: int, proof: list[bytes], cp: tlog.Checkpoint,
           body: str) -> None:
    """Raise ``Refusal`` unless the checkpoint extends what is held by ``proof``."""
    size = 0 if held is None else held.size
    if old != size:
        raise Refusal(409, str(size))
    if cp.size < size:
        raise Refusal(400, f"the checkpoint is smaller ({cp.size}) than the one co-signed "
                           f"({size})")
    if held is None:
        if proof:
            raise Refusal(422, "a first checkpoint takes no proof")
        return
    if cp.size == size and (cp.root != held.root or body != held.body):
        raise Refusal(422, "another checkpoint of the same size was co-signed")
    try:
        merkle.verify_consistency(size, cp.size, held.root, cp.root, proof)
    except merkle.ProofError as e:
        raise Refusal(422, f"the consistency proof does not verify: {e}") from None


class WitnessState:
    """The witness's SQLite file; one writer at a time (a lock around each decision)."""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)
        self.lock = threading.Lock()

    def close(self) -> None:
        self.db.close()

    def held(self, origin: str) -> Held | None:
        r = self.db.execute("SELECT size, root, body, note FROM checkpoints WHERE origin = ?",
                            (origin,)).fetchone()
        return None if r is None else Held(int(r[0]), bytes(r[1]), r[2], r[3])

    def conflict(self, origin: str) -> tuple[str, str] | None:
        r = self.db.execute("SELECT kept, other FROM conflicts WHERE origin = ?",
                            (origin,)).fetchone()
        return None if r is None else (r[0], r[1])

    def record_conflict(self, origin: str, kept: str, other: str, at: int) -> None:
        self.db.execute("INSERT OR IGNORE INTO conflicts VALUES (?, ?, ?, ?)",
                        (origin, kept, other, at))

    def keep(self, origin: str, was: int | None, cp: tlog.Checkpoint, note: str, at: int
             ) -> bool:
        """Keep ``cp`` if the size held is still ``was`` (None: nothing held)."""
        if was is None:
            cur = self.db.execute("INSERT OR IGNORE INTO checkpoints VALUES (?, ?, ?, ?, ?, ?)",
                                  (origin, cp.size, cp.root, cp.body(), note, at))
        else:
            cur = self.db.execute("UPDATE checkpoints SET size = ?, root = ?, body = ?, note = ?, "
                                  "at = ? WHERE origin = ? AND size = ?",
                                  (cp.size, cp.root, cp.body(), note, at, origin, was))
        return cur.rowcount == 1

    def forget(self, origin: str) -> bool:
        """An operator's act after a hub lost data or equivocated: start the line over."""
        a = self.db.execute("DELETE FROM checkpoints WHERE origin = ?", (origin,)).rowcount
        b = self.db.execute("DELETE FROM conflicts WHERE origin = ?", (origin,)).rowcount
        return bool(a or b)

    def release(self, origin: str, epoch: str, statement: str, cp: tlog.Checkpoint,
                note: str, at: int) -> bool:
        """A fork recovery (hub/witness/app.py ``release``): the line of ``origin`` starts
        again at ``cp``, its conflict cleared, the statement kept. False if that recovery
        was taken before."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                if self.db.execute("INSERT OR IGNORE INTO releases VALUES (?, ?, ?, ?, ?)",
                                   (origin, epoch, statement, note, at)).rowcount != 1:
                    self.db.execute("ROLLBACK")
                    return False
                self.db.execute("DELETE FROM conflicts WHERE origin = ?", (origin,))
                self.db.execute("INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?, ?, ?)",
                                (origin, cp.size, cp.root, cp.body(), note, at))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return True
