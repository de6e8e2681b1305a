"""The ``state`` root: one digest committing to a space's whole live entry set.

    entry (id, version)                       live entries only; a tombstone is absence
      └─ bucket(id) = first byte of SHA-256(id)            256 buckets, fixed fan-out
           └─ lattice[bucket] = Σ expand(id, version)      LtHash16: 1024 lanes mod 2^16
                └─ bucket digest = SHA-256(domain ‖ bucket ‖ lattice)
                     └─ root = SHA-256(domain ‖ digest_0 ‖ … ‖ digest_255)

Why this shape:

- **O(entries changed) per batch.** A lattice is a sum: changing one entry subtracts its old
  element and adds the new one, without reading any other entry of the bucket. The hub
  keeps the 256 lattices and the 256 bucket digests; a batch rewrites the touched buckets
  and one digest row, then hashes 8 KiB for the root.
- **Collision resistant.** LtHash with 1024 16-bit lanes is the homomorphic set hash of
  Lewi et al. (2019, "Securing update propagation with homomorphic hashing"), estimated at
  ≥ 200 bits of security; a plain sum or XOR of hashes is not (generalized birthday, linear
  algebra). Each bucket is then bound by SHA-256 and the root by SHA-256 of all digests.
- **Recomputable and subset-ready.** A replica computes the same lattices from its own
  store. A later filtered replica that holds every entry of some buckets verifies them
  against a signed root with the 256 bucket digests (8 KiB) as the proof.

Pure functions, no I/O. Lattices travel as ``bytes`` (2048, little-endian lanes).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

BUCKETS = 256
LANES = 1024
LATTICE_BYTES = LANES * 2
_BITS = LANES * 16
_FULL = (1 << _BITS) - 1
_HIGH = int.from_bytes(b"\x00\x80" * LANES, "little")  # bit 15 of every lane
_LOW = _FULL ^ _HIGH
_ONES = int.from_bytes(b"\x01\x00" * LANES, "little")  # 1 in every lane

ELEMENT_DOMAIN = b"quire-state-element-v1\x00"
BUCKET_DOMAIN = b"quire-state-bucket-v1\x00"
ROOT_DOMAIN = b"quire-state-root-v1\x00"
ZERO = bytes(LATTICE_BYTES)


def bucket_of(entry_id: str) -> int:
    """The bucket of an entry id: the first byte of SHA-256 of its UTF-8 form."""
    return hashlib.sha256(entry_id.encode("utf-8")).digest()[0]


def element(entry_id: str, version: str) -> int:
    """The lattice element of one live entry, as an int of 1024 little-endian 16-bit lanes.
    The id is length-prefixed so no (id, version) pair can be read as another."""
    raw = entry_id.encode("utf-8")
    h = hashlib.shake_128(ELEMENT_DOMAIN + len(raw).to_bytes(4, "big") + raw
                          + version.encode("ascii"))
    return int.from_bytes(h.digest(LATTICE_BYTES), "little")


def _add(a: int, b: int) -> int:
    """Lane-wise a + b mod 2^16 (no carry crosses a lane)."""
    return ((a & _LOW) + (b & _LOW)) ^ ((a ^ b) & _HIGH)


def _neg(a: int) -> int:
    return _add(a ^ _FULL, _ONES)


def to_int(lattice: bytes) -> int:
    if len(lattice) != LATTICE_BYTES:
        raise ValueError(f"a lattice is {LATTICE_BYTES} bytes")
    return int.from_bytes(lattice, "little")


def to_bytes(value: int) -> bytes:
    return value.to_bytes(LATTICE_BYTES, "little")


def bucket_digest(bucket: int, lattice: bytes) -> bytes:
    return hashlib.sha256(BUCKET_DOMAIN + bytes([bucket]) + lattice).digest()


EMPTY_DIGESTS = tuple(bucket_digest(b, ZERO) for b in range(BUCKETS))


def root_of(digests: Iterable[bytes]) -> str:
    """The root (hex) over the 256 bucket digests, in bucket order."""
    ds = list(digests)
    if len(ds) != BUCKETS or set(map(len, ds)) != {32}:
        raise ValueError(f"a root is over {BUCKETS} digests of 32 bytes")
    return hashlib.sha256(ROOT_DOMAIN + b"".join(ds)).hexdigest()


EMPTY_ROOT = root_of(EMPTY_DIGESTS)

Change = tuple[str, "str | None", "str | None"]  # (entry id, old live version, new live version)


def moved(acc: int, entry_id: str, old: str | None, new: str | None) -> int:
    """The lattice ``acc`` with the element of ``(entry_id, old)`` taken out and that of
    ``(entry_id, new)`` put in (``None``: absent on that side). Also the folder tree's
    per-folder lattices (shared/foldertree.py)."""
    if old is not None:
        acc = _add(acc, _neg(element(entry_id, old)))
    if new is not None:
        acc = _add(acc, element(entry_id, new))
    return acc


def apply_changes(lattices: Mapping[int, bytes], changes: Iterable[Change]
                  ) -> dict[int, bytes]:
    """New lattices of the buckets ``changes`` touch. ``lattices`` holds the current lattice
    of (at least) those buckets; a missing bucket is empty. A version is ``None`` when the
    entry is absent or a tombstone on that side."""
    acc: dict[int, int] = {}
    for entry_id, old, new in changes:
        if old == new:
            continue
        b = bucket_of(entry_id)
        v = acc.get(b)
        if v is None:
            v = to_int(lattices.get(b, ZERO))
        acc[b] = moved(v, entry_id, old, new)
    return {b: to_bytes(v) for b, v in acc.items()}


def lattices_of(entries: Iterable[tuple[str, str]]) -> dict[int, bytes]:
    """Lattices of the non-empty buckets of a live entry set ``(id, version)``."""
    acc: dict[int, int] = {}
    for entry_id, version in entries:
        b = bucket_of(entry_id)
        acc[b] = _add(acc.get(b, 0), element(entry_id, version))
    return {b: to_bytes(v) for b, v in acc.items()}


def sum_lattices(parts: Iterable[Mapping[int, bytes]]) -> dict[int, bytes]:
    """Bucket by bucket, the lane-wise sums of lattices (``lattices_of`` of a set's parts,
    summed, is ``lattices_of`` of the whole set)."""
    acc: dict[int, int] = {}
    for part in parts:
        for b, lat in part.items():
            acc[b] = _add(acc.get(b, 0), to_int(lat))
    return {b: to_bytes(v) for b, v in acc.items()}


def digests_with(digests: list[bytes] | tuple[bytes, ...], lattices: Mapping[int, bytes]
                 ) -> list[bytes]:
    """``digests`` with the buckets of ``lattices`` replaced by their new digests."""
    out = list(digests)
    for b, lat in lattices.items():
        out[b] = bucket_digest(b, lat)
    return out


def root_of_entries(entries: Iterable[tuple[str, str]]) -> str:
    """The root of a live entry set, from scratch (replicas, ``quire verify``, tests)."""
    return root_of(digests_with(EMPTY_DIGESTS, lattices_of(entries)))


def pack_digests(digests: Iterable[bytes]) -> bytes:
    return b"".join(digests)


def unpack_digests(blob: bytes) -> list[bytes]:
    if len(blob) != 32 * BUCKETS:
        raise ValueError("bucket digests are 256 x 32 bytes")
    b = bytes(blob)  # one copy (a memoryview or bytearray from a driver), then slices
    return [b[i:i + 32] for i in range(0, len(b), 32)]
