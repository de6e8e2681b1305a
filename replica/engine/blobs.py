"""Attachments in the sync engine (docs/replica.md, "Attachments"; decisions.md D147): the
bytes that go up before the batch naming them, and come down, checked, before the store
transaction that takes the entry commits.

    scan: a changed file that is not Markdown ──► attachment entry (shared/attachments.py)
          its bytes kept in the blob cache (replica/store/blobs.py), over the limit: a
          problem (too_large), never published
    push: upload_blobs(client, space, cache, entries)   ◄── the one upload path (quire
          import calls it too): each attachment a batch puts, PUT before the POST
    pull, snapshot, head event: Ledger.merge_remote_txn ─► Blobs.ensure(entry): fetched
          and checked (size and SHA-256, replica/hubclient/client.py) inside the store
          transaction: a hub that serves other bytes is refused (hub_unverified), the
          transaction rolls back, nothing reaches the store, the cache or the vault
    vault write: the ledger's journal names the blob (``BLOB_PREFIX`` + hash); the flush
          writes the cached bytes with the vault's atomic write (temp, fsync, rename)

With ``--attachments lazy`` (``Blobs.lazy``) the pull does not fetch: the entry is stored,
its file is written when its bytes are first read (``quire read``), or by a later eager
sync.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replica.store.blobs import BlobCache
from replica.vault import markdown as md
from shared.attachments import DEFAULT_MAX_BYTES, is_attachment, too_large_message

# a journaled vault write of an attachment: the hash of its bytes, after this prefix (no
# rendered Markdown starts with a NUL)
BLOB_PREFIX = "\x00blob:"
LAZY_KEY = "attachments_lazy"
RANGE_BYTES = 4 * 1024 * 1024  # larger blobs go up in ranges of this (resumable)  # store meta: this replica fetches attachments on first read


def journal_content(entry: Any) -> str:
    return BLOB_PREFIX + str(entry.meta["sha256"])


def journaled_blob(content: str | None) -> str | None:
    """The hash a journaled write names, or None for a Markdown write or a delete."""
    if content is not None and content.startswith(BLOB_PREFIX):
        return content[len(BLOB_PREFIX):]
    return None


@dataclass
class Blobs:
    """The blob lane of one replica: its cache, and how it fetches from the hub."""

    cache: BlobCache
    client: Any = None
    space_id: str = ""
    lazy: bool = False
    fetched: list[str] = field(default_factory=list)

    def ensure(self, entry: Any) -> bool:
        """The bytes of an attachment entry in the cache (fetched and checked when not);
        False when left for later (lazy, or no client). ``HubUnverified`` when the hub
        served other bytes (nothing kept)."""
        sha = entry.meta["sha256"]
        if self.cache.has(sha):
            return True
        if self.lazy or self.client is None:
            return False
        data = self.client.get_blob(self.space_id, sha, entry.meta["size"])
        self.cache.put(sha, data)
        self.fetched.append(sha)
        return True


def limit_txn(conn: Any) -> int:
    """The space's limit on one attachment, as its last head said (0: none)."""
    from replica.store import store as st

    usage = st.get_meta_txn(conn, "usage")
    limit = usage.get("attachment_limit") if isinstance(usage, dict) else None
    return limit if isinstance(limit, int) and limit >= 0 else DEFAULT_MAX_BYTES


def too_large(vault: Path, fs: Any, limit: int) -> md.Problem | None:
    """The problem of a changed attachment file over ``limit`` (named, with the limit), or
    None: a file that is Markdown, or within it. Checked by its stat, before reading."""
    if not limit or fs.size <= limit or md.is_markdown(fs.os_path):
        return None
    return md.Problem(fs.path.relative_to(vault).as_posix(), None,
                      too_large_message(fs.entry_id, fs.size, limit), fs.entry_id)


def copy_beside(theirs: Any, taken: Callable[[str], bool]) -> Any:
    """Pure: the attachment entry of ``theirs``'s bytes under a free name beside it
    (``img/diagram (theirs).png``, then ``(theirs 2)``, …), or None when none fits."""
    from shared.entry import make_entry
    from shared.ids import entry_id_problem, portability_problem

    folder, _, name = theirs.id.rpartition("/")
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        stem, ext = name, ""
    for n in range(1, 100):
        label = "theirs" if n == 1 else f"theirs {n}"
        new = f"{stem} ({label})" + (f".{ext}" if ext else "")
        eid = f"{folder}/{new}" if folder else new
        if entry_id_problem(eid) or portability_problem(eid) or taken(eid):
            continue
        d = dict(theirs.to_dict(), id=eid, title=new)
        return make_entry(d)
    return None


def collect_unnamed(store: Any, cache: BlobCache) -> list[str]:
    """Remove the cached blobs no entry of the store names any more (after a purge: its
    bytes leave this machine with the entry, as they left the hub); the hashes removed."""
    named: set[str] = set()
    for s in store.states().values():
        for e in (s.synced, s.local, s.file_base):
            if is_attachment(e):
                named.add(e.meta["sha256"])
    for c in store.conflicts():
        for e in (c.base, c.ours, c.theirs):
            if is_attachment(e):
                named.add(e.meta["sha256"])
    gone = sorted(cache.hashes() - named)
    for sha in gone:
        cache.remove(sha)
    return gone


def upload_blobs(client: Any, space_id: str, cache: BlobCache,
                 entries: Iterable[Any]) -> int:
    """Upload the bytes of every attachment among ``entries`` (from the cache, where the
    scan or an import put them) before the batch that names them; how many were sent.
    Over ``RANGE_BYTES`` in ranges that resume where a cut upload stopped.
    Idempotent: the hub keeps one copy a space and hash. An attachment whose bytes are not
    in the cache is left out: the hub then refuses its batch (``blob_missing``), and the
    entry stays unpublished until its file is read again."""
    sent = 0
    seen: set[str] = set()
    for entry in entries:
        if entry is None or not is_attachment(entry):
            continue
        sha = entry.meta["sha256"]
        if sha in seen:
            continue
        seen.add(sha)
        data = cache.read(sha)
        if data is None:
            continue
        if len(data) > RANGE_BYTES:
            upload_resumable(client, space_id, sha, data)
        else:
            client.put_blob(space_id, sha, data)
        sent += 1
    return sent


def upload_resumable(client: Any, space_id: str, sha: str, data: bytes,
                     chunk: int | None = None) -> None:
    """Upload ``data`` in ranges of ``chunk`` bytes (``Content-Range``), from where the
    hub's received bytes end: an upload cut by a lost connection goes on from there at
    the next sync instead of starting again."""
    chunk = chunk or RANGE_BYTES
    status = client.upload_status(space_id, sha)
    if status.get("stored"):
        return
    start = int(status.get("received") or 0)
    while start < len(data):
        part = data[start:start + chunk]
        out = client.put_blob_range(space_id, sha, part, start, len(data))
        if out.get("stored") or int(out.get("received") or 0) >= len(data):
            return
        start = int(out["received"])
