"""The space log's Merkle tree (shared/merkle.py) against RFC 9162: the Certificate
Transparency reference vectors (the eight leaves of RFC 6962's test data), and, over random
sizes, a direct transcription of the RFC's recursive definitions (MTH, PATH, PROOF) written
here independently of the module's iterative, node-store-backed code."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from shared import merkle
from shared.merkle import ProofError, Tree

DATA = [bytes.fromhex(h) for h in ("", "00", "10", "2021", "3031", "40414243",
                                   "5051525354555657", "606162636465666768696a6b6c6d6e6f")]
LEAVES = [merkle.leaf_hash(d) for d in DATA]
ROOTS = ["e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
         "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
         "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
         "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
         "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
         "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
         "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
         "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
         "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"]
INCLUSION = [(0, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                     "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                     "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
             (5, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                     "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                     "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"])]
CONSISTENCY = [(1, 1, []),
               (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                       "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                       "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
               (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
                       "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                       "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
               (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                       "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"])]


# ---------------------------------------------------------------- RFC 9162 as written


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(d: list[bytes]) -> bytes:
    if not d:
        return hashlib.sha256(b"").digest()
    if len(d) == 1:
        return d[0]
    k = _k(len(d))
    return hashlib.sha256(b"\x01" + mth(d[:k]) + mth(d[k:])).digest()


def path(m: int, d: list[bytes]) -> list[bytes]:
    if len(d) == 1:
        return []
    k = _k(len(d))
    if m < k:
        return path(m, d[:k]) + [mth(d[k:])]
    return path(m - k, d[k:]) + [mth(d[:k])]


def subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
    if m == len(d):
        return [] if b else [mth(d)]
    k = _k(len(d))
    if m <= k:
        return subproof(m, d[:k], b) + [mth(d[k:])]
    return subproof(m - k, d[k:], False) + [mth(d[:k])]


def _store(leaves: list[bytes]) -> dict[tuple[int, int], bytes]:
    """Every perfect node, by appending one leaf at a time as the hub does."""
    nodes: dict[tuple[int, int], bytes] = {}
    frontier: list[bytes] = []
    for i, leaf in enumerate(leaves):
        frontier, new = merkle.append(i, frontier, leaf)
        nodes.update(new)
    assert merkle.fold(frontier) == mth(leaves)
    return nodes


# ---------------------------------------------------------------- reference vectors


def test_roots_match_the_reference_vectors() -> None:
    for n in range(9):
        assert merkle.root_of(LEAVES[:n]).hex() == ROOTS[n]
        assert Tree.over(_store(LEAVES[:n])).root(n).hex() == ROOTS[n]


def test_inclusion_proofs_match_the_reference_vectors() -> None:
    tree = Tree.over(_store(LEAVES))
    for index, size, want in INCLUSION:
        proof = tree.inclusion_proof(index, size)
        assert [p.hex() for p in proof] == want
        merkle.verify_inclusion(LEAVES[index], index, size, proof, bytes.fromhex(ROOTS[size]))


def test_consistency_proofs_match_the_reference_vectors() -> None:
    tree = Tree.over(_store(LEAVES))
    for first, second, want in CONSISTENCY:
        proof = tree.consistency_proof(first, second)
        assert [p.hex() for p in proof] == want
        merkle.verify_consistency(first, second, bytes.fromhex(ROOTS[first]),
                                  bytes.fromhex(ROOTS[second]), proof)


# ---------------------------------------------------------------- random sizes


def _leaves(n: int) -> list[bytes]:
    return [merkle.leaf_hash(i.to_bytes(4, "big")) for i in range(n)]


@settings(max_examples=60, deadline=None)
@given(hs.integers(1, 260), hs.data())
def test_proofs_equal_the_rfc_definitions(n: int, data: hs.DataObject) -> None:
    leaves = _leaves(n)
    nodes = _store(leaves)
    tree = Tree.over(nodes)
    m = data.draw(hs.integers(0, n - 1))
    first = data.draw(hs.integers(1, n))
    assert tree.root(n) == mth(leaves)
    assert tree.inclusion_proof(m, n) == path(m, leaves)
    merkle.verify_inclusion(leaves[m], m, n, path(m, leaves), mth(leaves))
    want = [] if first == n else subproof(first, leaves, True)
    assert tree.consistency_proof(first, n) == want
    merkle.verify_consistency(first, n, mth(leaves[:first]), mth(leaves), want)
    # the nodes a proof reads: what the hub fetches in one query, O(log² n)
    need = Tree.needed(lambda t: t.consistency_proof(first, n))
    assert need <= set(nodes) and len(need) <= (n.bit_length() + 1) ** 2
    assert Tree.over({k: nodes[k] for k in need}).consistency_proof(first, n) == want


@settings(max_examples=60, deadline=None)
@given(hs.integers(2, 200), hs.data())
def test_tampered_proofs_are_refused(n: int, data: hs.DataObject) -> None:
    leaves = _leaves(n)
    root = mth(leaves)
    m = data.draw(hs.integers(0, n - 1))
    proof = path(m, leaves)
    with pytest.raises(ProofError):  # another leaf
        merkle.verify_inclusion(merkle.leaf_hash(b"x"), m, n, proof, root)
    if proof:
        i = data.draw(hs.integers(0, len(proof) - 1))
        bad = [*proof[:i], bytes(32), *proof[i + 1:]]
        with pytest.raises(ProofError):
            merkle.verify_inclusion(leaves[m], m, n, bad, root)
        with pytest.raises(ProofError):  # a proof cut short
            merkle.verify_inclusion(leaves[m], m, n, proof[:-1], root)
    first = data.draw(hs.integers(1, n - 1))
    cproof = subproof(first, leaves, True)
    old = mth(leaves[:first])
    with pytest.raises(ProofError):  # a proof for a different old root
        merkle.verify_consistency(first, n, merkle.leaf_hash(b"other"), root, cproof)
    with pytest.raises(ProofError):  # a different new root
        merkle.verify_consistency(first, n, old, merkle.leaf_hash(b"other"), cproof)
    with pytest.raises(ProofError):  # a smaller size
        merkle.verify_consistency(n, first, root, old, cproof)
    forked = [*leaves[:first], *_leaves(n + 1)[first + 1:]] if first < n else leaves
    if mth(forked) != root:
        with pytest.raises(ProofError):  # a fork after the old size: its own proof fails
            merkle.verify_consistency(first, n, old, root, subproof(first, forked, True))


def test_same_size_needs_the_same_root() -> None:
    a, b = merkle.root_of(_leaves(5)), merkle.root_of(_leaves(6)[1:])
    merkle.verify_consistency(5, 5, a, a, [])
    with pytest.raises(ProofError):
        merkle.verify_consistency(5, 5, a, b, [])


def test_append_refuses_a_frontier_of_the_wrong_size() -> None:
    with pytest.raises(ValueError):
        merkle.append(3, [bytes(32)], bytes(32))


@settings(max_examples=40, deadline=None)
@given(hs.integers(1, 120), hs.data())
def test_a_partly_built_store_gives_the_same_proofs(n: int, data: hs.DataObject) -> None:
    """The hub stores leaves at publication and builds the nodes above them later: proofs
    over a store built up to any point equal those over the whole tree."""
    leaves = _leaves(n)
    full = _store(leaves)
    built = data.draw(hs.integers(0, n))
    stored = {k: v for k, v in full.items()
              if k[0] == 0 or (k[1] + 1) << k[0] <= built}
    tree = Tree(merkle.built_upto(stored.__getitem__, built))
    first = data.draw(hs.integers(1, n))
    assert tree.root(n) == mth(leaves)
    assert tree.consistency_proof(first, n) == Tree.over(full).consistency_proof(first, n)
    # building from ``built`` to ``n`` adds exactly the missing nodes
    assert set(merkle.completed(built, n)) == set(full) - set(stored)
