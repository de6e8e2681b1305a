"""The append-only Merkle log of a space, pure (RFC 9162, section 2.1; docs/architecture.md,
"The log and its witnesses").

    leaf hash   SHA-256(0x00 ‖ data)          node hash   SHA-256(0x01 ‖ left ‖ right)
    MTH(D[n])   empty: SHA-256(); one leaf: its leaf hash; else, with k the largest power
                of two below n: node(MTH(D[0:k]), MTH(D[k:n]))

    what the hub keeps          what it computes from them            what a verifier holds
    ───────────────────         ──────────────────────────            ─────────────────────
    perfect nodes (level, i):   root of any size n  (≤ log n nodes)   (size, root) pairs
      hash of D[i·2^l, (i+1)·2^l) inclusion proof    (≤ log n hashes)   verify_inclusion
    frontier: the perfect nodes consistency proof  (≤ log n hashes)   verify_consistency
      the next append needs     (``Tree``: ``needed`` then ``*_proof``)

Every subtree an RFC 9162 proof names starts at a multiple of a power of two no smaller
than it, so it is either a perfect node or the right edge of the tree, which splits into
at most log n perfect nodes (``nodes_of``). The hub therefore stores only perfect nodes
(about 2n in all) and answers any proof from O(log² n) of them read in one query: it asks
``Tree.needed`` which nodes a proof touches, reads them, and hands them to ``Tree``.

Verification is O(log n) hashes and no storage: a replica at size 1,000,000 checks a proof
in a few dozen SHA-256 calls (bench/merkle.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()

Node = tuple[int, int]  # (level, index): the perfect subtree D[index·2^level, (index+1)·2^level)


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two strictly below ``n`` (n ≥ 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def root_of(leaves: list[bytes]) -> bytes:
    """MTH over leaf hashes, by the definition (a reference: O(n))."""
    if not leaves:
        return EMPTY_ROOT
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return node_hash(root_of(leaves[:k]), root_of(leaves[k:]))


# ---------------------------------------------------------------- appending


def nodes_of(start: int, size: int) -> list[Node]:
    """The perfect nodes whose hashes make MTH(D[start:start+size]), left to right (the
    binary decomposition of ``size``; ``start`` a multiple of the largest part)."""
    out = []
    pos, rest = start, size
    while rest:
        level = rest.bit_length() - 1
        out.append((level, pos >> level))
        pos += 1 << level
        rest -= 1 << level
    return out


def frontier_nodes(size: int) -> list[Node]:
    """The perfect nodes the root of a tree of ``size`` leaves is made of (highest first):
    all an append needs."""
    return nodes_of(0, size)


def fold(hashes: list[bytes]) -> bytes:
    """MTH from the hashes of ``nodes_of`` (left to right): the right edge folds first."""
    if not hashes:
        return EMPTY_ROOT
    acc = hashes[-1]
    for h in reversed(hashes[:-1]):
        acc = node_hash(h, acc)
    return acc


def append(size: int, frontier: list[bytes], leaf: bytes
           ) -> tuple[list[bytes], list[tuple[Node, bytes]]]:
    """Append ``leaf`` (a leaf hash) to a tree of ``size`` leaves whose frontier hashes are
    ``frontier`` (``frontier_nodes(size)`` order). Returns the new frontier and every perfect
    node the append completes, the leaf first: what the hub writes (amortized two rows)."""
    if len(frontier) != bin(size).count("1"):
        raise ValueError("the frontier does not match the size")
    new: list[tuple[Node, bytes]] = [((0, size), leaf)]
    stack = list(frontier)
    level, index, h = 0, size, leaf
    while index & 1:  # a right child: its left sibling is the frontier's lowest node
        h = node_hash(stack.pop(), h)
        level, index = level + 1, index >> 1
        new.append(((level, index), h))
    stack.append(h)
    return stack, new


# ---------------------------------------------------------------- proofs from stored nodes


class Tree:
    """Proofs over a tree of at least ``size`` leaves, from perfect node hashes.

    ``node`` returns the hash of a perfect node. Run a proof once with ``Tree.needed`` to
    learn which nodes it reads, fetch those, and run it again over them (``Tree.over``)."""

    def __init__(self, node: Callable[[Node], bytes]):
        self._node = node

    @staticmethod
    def over(nodes: Mapping[Node, bytes]) -> Tree:
        return Tree(nodes.__getitem__)

    @staticmethod
    def needed(proof: Callable[[Tree], object], built: int | None = None) -> set[Node]:
        """The stored nodes ``proof(tree)`` reads (from a store built up to ``built``
        leaves, ``built_upto``, when given)."""
        seen: set[Node] = set()

        def record(n: Node) -> bytes:
            seen.add(n)
            return bytes(HASH_SIZE)

        proof(Tree(record if built is None else built_upto(record, built)))
        return seen

    def node(self, n: Node) -> bytes:
        """The hash of a perfect node."""
        return self._node(n)

    def mth(self, start: int, size: int) -> bytes:
        """MTH(D[start:start+size])."""
        if size == 0:
            return EMPTY_ROOT
        return fold([self._node(n) for n in nodes_of(start, size)])

    def root(self, size: int) -> bytes:
        return self.mth(0, size)

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """PATH(index, D[size]) (RFC 9162, 2.1.3.1): the audit path, leaf side first."""
        if not 0 <= index < size:
            raise ValueError("the index is not in the tree")
        out: list[bytes] = []
        start, n, m = 0, size, index
        while n > 1:
            k = _split(n)
            if m < k:
                out.append(self.mth(start + k, n - k))
                n = k
            else:
                out.append(self.mth(start, k))
                start, n, m = start + k, n - k, m - k
        out.reverse()
        return out

    def consistency_proof(self, first: int, second: int) -> list[bytes]:
        """PROOF(first, D[second]) (RFC 9162, 2.1.4.1); empty when ``first`` is 0 or equal."""
        if not 0 <= first <= second:
            raise ValueError("the first size is larger than the second")
        if first == 0 or first == second:
            return []
        out: list[bytes] = []
        start, n, m, whole = 0, second, first, True
        while m != n:
            k = _split(n)
            if m <= k:
                out.append(self.mth(start + k, n - k))
                n = k
            else:
                out.append(self.mth(start, k))
                start, n, m, whole = start + k, n - k, m - k, False
        if not whole:
            out.append(self.mth(start, m))
        out.reverse()
        return out


def built_upto(stored: Callable[[Node], bytes], built: int) -> Callable[[Node], bytes]:
    """A node getter over a store that holds every leaf, but the perfect nodes above them
    only for the first ``built`` leaves: a node past that is computed from its children
    (each at most once per getter). Its reads are what ``Tree.needed`` records."""
    memo: dict[Node, bytes] = {}

    def node(n: Node) -> bytes:
        level, index = n
        if level == 0 or (index + 1) << level <= built:
            return stored(n)
        h = memo.get(n)
        if h is None:
            h = memo[n] = node_hash(node((level - 1, 2 * index)), node((level - 1, 2 * index + 1)))
        return h

    return node


def completed(start: int, end: int) -> list[Node]:
    """The perfect nodes above the leaves that appending leaves ``start`` to ``end - 1``
    completes (what building the tree from ``start`` to ``end`` leaves adds)."""
    out = []
    level = 1
    while (1 << level) <= end:
        first = start >> level  # the first node whose last leaf is at or past ``start``
        for index in range(first, end >> level):
            if (index + 1) << level > start:
                out.append((level, index))
        level += 1
    return out


def tree_of(leaves: list[bytes]) -> Tree:
    """A ``Tree`` over leaf hashes held in memory (tests, small logs)."""
    return Tree(lambda n: root_of(leaves[n[1] << n[0]:(n[1] + 1) << n[0]]))


# ---------------------------------------------------------------- verification


class ProofError(ValueError):
    """A proof that does not verify (or is malformed)."""


def _hashes(proof: Iterable[bytes]) -> list[bytes]:
    out = list(proof)
    if len(out) > 64 or any(not isinstance(h, bytes) or len(h) != HASH_SIZE for h in out):
        raise ProofError("a proof is at most 64 hashes of 32 bytes")
    return out


def verify_inclusion(leaf: bytes, index: int, size: int, proof: Iterable[bytes],
                     root: bytes) -> None:
    """RFC 9162, 2.1.3.2: ``leaf`` is at ``index`` in the tree of ``size`` with ``root``."""
    path = _hashes(proof)
    if not 0 <= index < size:
        raise ProofError("the index is not in the tree")
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            raise ProofError("the inclusion proof is too long")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0 or r != root:
        raise ProofError("the inclusion proof does not lead to the root")


def verify_consistency(first: int, second: int, first_root: bytes, second_root: bytes,
                       proof: Iterable[bytes]) -> None:
    """RFC 9162, 2.1.4.2: the tree of ``second`` leaves with ``second_root`` extends the
    tree of ``first`` leaves with ``first_root``."""
    path = _hashes(proof)
    if not 0 <= first <= second:
        raise ProofError("the new tree is smaller than the old one")
    if first == second:
        if path or first_root != second_root:
            raise ProofError("two trees of one size with different roots")
        return
    if first == 0:
        if path:
            raise ProofError("a proof from the empty tree is empty")
        return
    if not path:
        raise ProofError("the consistency proof is empty")
    if first & (first - 1) == 0:  # a power of two: the old root is the first node
        path = [first_root, *path]
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("the consistency proof is too long")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("the consistency proof is too short")
    if fr != first_root:
        raise ProofError("the consistency proof is for another old root")
    if sr != second_root:
        raise ProofError("the consistency proof does not lead to the new root")
