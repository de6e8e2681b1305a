"""The blob cache of one space: the bytes of its attachments, one file a SHA-256, beside
the store (``<store folder>/blobs/ab/abcdef…``). What the vault's attachment files are
written from, and what an upload reads (docs/replica.md, "Attachments").

Only bytes that hash to their name are ever in it: ``put`` checks before its atomic rename,
``read`` checks again (a damaged cache file is dropped and fetched anew, never written to
the vault). A purge removes the files of what it purged (replica/engine/purge.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from shared.attachments import blob_hash, is_sha256


class BlobCache:
    def __init__(self, root: Path):
        self.root = root

    def path(self, sha256: str) -> Path:
        if not is_sha256(sha256):
            raise ValueError(f"not a SHA-256: {sha256!r}")
        return self.root / sha256[:2] / sha256

    def has(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def read(self, sha256: str) -> bytes | None:
        """The bytes of ``sha256``, checked; None when absent or damaged (then removed)."""
        p = self.path(sha256)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            return None
        if blob_hash(data) != sha256:
            p.unlink(missing_ok=True)
            return None
        return data

    def put(self, sha256: str, data: bytes) -> None:
        """Keep ``data`` as ``sha256`` (temp file, fsync, rename); refused unless it hashes
        to it."""
        if blob_hash(data) != sha256:
            raise ValueError("bytes do not hash to their name")
        p = self.path(sha256)
        if p.is_file():
            return
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + f".{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)

    def remove(self, sha256: str) -> None:
        self.path(sha256).unlink(missing_ok=True)

    def hashes(self) -> set[str]:
        if not self.root.is_dir():
            return set()
        return {p.name for p in self.root.glob("??/*") if is_sha256(p.name)}
