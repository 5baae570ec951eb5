"""RFC 6962 / 9162 Merkle proofs: the reference vectors, tampered proofs, and agreement with an
independent implementation (pymerkle) on roots and audit paths for every size up to 70."""

from __future__ import annotations

import base64
import hashlib
import random
import warnings

import pytest

from reports.merkle import EMPTY_ROOT, MerkleTree, leaf_hash, node_hash, verify_consistency, verify_inclusion

# The RFC 6962 reference test data (Certificate Transparency / transparency-dev): eight leaf
# inputs, the root of every prefix, inclusion proofs (0-based leaf index, tree size, path) and
# consistency proofs (first size, second size, path).
LEAVES = [bytes.fromhex(h) for h in ("", "00", "10", "2021", "3031", "40414243", "5051525354555657",
                                      "606162636465666768696a6b6c6d6e6f")]
ROOTS = [bytes.fromhex(h) for h in (
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
)]
H = bytes.fromhex
INCLUSION = [
    (0, 1, []),
    (0, 8, [H("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            H("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            H("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4")]),
    (5, 8, [H("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
            H("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            H("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")]),
    (2, 3, [H("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")]),
    (1, 5, [H("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
            H("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            H("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")]),
]
CONSISTENCY = [
    (1, 1, []),
    (1, 8, [H("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            H("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            H("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4")]),
    (6, 8, [H("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            H("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            H("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")]),
    (2, 5, [H("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            H("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")]),
]


@pytest.fixture(scope="module")
def tree() -> MerkleTree:
    return MerkleTree([leaf_hash(x) for x in LEAVES])


def test_hashing_is_rfc6962_domain_separated():
    assert leaf_hash(b"x") == hashlib.sha256(b"\x00x").digest()
    assert node_hash(b"a" * 32, b"b" * 32) == hashlib.sha256(b"\x01" + b"a" * 32 + b"b" * 32).digest()
    assert MerkleTree().root() == EMPTY_ROOT == ROOTS[0]


def test_reference_roots(tree):
    assert [tree.root(n) for n in range(9)] == ROOTS


@pytest.mark.parametrize("index, size, path", INCLUSION)
def test_reference_inclusion_proofs(tree, index, size, path):
    assert tree.inclusion_proof(index, size) == path
    assert verify_inclusion(index, size, leaf_hash(LEAVES[index]), path, ROOTS[size])


@pytest.mark.parametrize("first, second, path", CONSISTENCY)
def test_reference_consistency_proofs(tree, first, second, path):
    assert tree.consistency_proof(first, second) == path
    assert verify_consistency(first, second, ROOTS[first], ROOTS[second], path)


def flip(h: bytes, bit: int = 0) -> bytes:
    return bytes([h[0] ^ (1 << bit)]) + h[1:]


def inclusion_tamperings(index, size, leaf, path, root):
    """The corruptions transparency-dev's verifier tests apply (verify_test.go), as (name, args)."""
    yield "wrong index", (index ^ 1 if size > 1 else index + 1, size, leaf, path, root)
    yield "index past the tree", (size, size, leaf, path, root)
    # A size alone changed may still be a well-formed claim about another tree; one that needs
    # more or fewer levels than the path has is not.
    yield "size needing one more level", (index, 2 * size + 1, leaf, path, root)
    yield "empty tree", (index, 0, leaf, path, root)
    yield "flipped leaf", (index, size, flip(leaf), path, root)
    yield "flipped root", (index, size, leaf, path, flip(root))
    yield "empty-tree root", (index, size, leaf, path, EMPTY_ROOT)
    yield "trailing hash", (index, size, leaf, [*path, ROOTS[1]], root)
    yield "leading hash", (index, size, leaf, [ROOTS[1], *path], root)
    yield "trailing bytes on a hash", (index, size, leaf, [*path[:-1], path[-1] + b"\x00"] if path else [b"\x00"], root)
    for i in range(len(path)):
        yield f"flipped path[{i}]", (index, size, leaf, [*path[:i], flip(path[i], 7), *path[i + 1:]], root)
        yield f"dropped path[{i}]", (index, size, leaf, path[:i] + path[i + 1:], root)
    if len(path) > 1:
        yield "swapped path", (index, size, leaf, [path[1], path[0], *path[2:]], root)
        yield "truncated path", (index, size, leaf, path[:-1], root)


@pytest.mark.parametrize("index, size, path", INCLUSION)
def test_tampered_inclusion_proofs_fail(index, size, path):
    args = (index, size, leaf_hash(LEAVES[index]), path, ROOTS[size])
    assert verify_inclusion(*args)
    for name, bad in inclusion_tamperings(*args):
        assert not verify_inclusion(*bad), name


def consistency_tamperings(first, second, path):
    r1, r2 = ROOTS[first], ROOTS[second]
    if r1 != r2:
        yield "swapped roots", (first, second, r2, r1, path)
    yield "flipped first root", (first, second, flip(r1), r2, path)
    yield "flipped second root", (first, second, r1, flip(r2), path)
    yield "second size not fully used by the proof", (first, 2 * second + 1, r1, r2, path)
    yield "first size past the second", (second + 1, second, r1, r2, path)
    yield "equal sizes with a path", (second, second, r2, r2, [r1])
    yield "trailing hash", (first, second, r1, r2, [*path, ROOTS[1]])
    yield "trailing bytes", (first, second, r1, r2, [*path[:-1], path[-1] + b"\x00"] if path else [b"\x00"])
    for i in range(len(path)):
        yield f"flipped path[{i}]", (first, second, r1, r2, [*path[:i], flip(path[i], 3), *path[i + 1:]])
        yield f"dropped path[{i}]", (first, second, r1, r2, path[:i] + path[i + 1:])
    if len(path) > 1:
        yield "swapped path", (first, second, r1, r2, [path[1], path[0], *path[2:]])
        yield "truncated path", (first, second, r1, r2, path[:-1])


@pytest.mark.parametrize("first, second, path", CONSISTENCY)
def test_tampered_consistency_proofs_fail(first, second, path):
    assert verify_consistency(first, second, ROOTS[first], ROOTS[second], path)
    for name, bad in consistency_tamperings(first, second, path):
        assert not verify_consistency(*bad), name


def test_the_second_size_must_be_fully_used():
    """The (2, 5) proof recomputes both roots for a claimed second size of 9 too (fr and sr
    match); only the final check that sn reached 0, i.e. the proof covered every level of the
    second tree, refuses it."""
    path = CONSISTENCY[3][2]
    assert verify_consistency(2, 5, ROOTS[2], ROOTS[5], path)
    assert not verify_consistency(2, 9, ROOTS[2], ROOTS[5], path)
    # what the RFC's steps give without that final check: the roots do match
    fr = sr = ROOTS[2]
    for c in path:
        sr = node_hash(sr, c)
    assert (fr, sr) == (ROOTS[2], ROOTS[5])


def test_equal_and_empty_first_trees():
    assert verify_consistency(3, 3, ROOTS[3], ROOTS[3], [])
    assert not verify_consistency(3, 3, ROOTS[3], ROOTS[4], [])
    assert not verify_consistency(3, 3, ROOTS[3], ROOTS[3], [ROOTS[1]])
    assert verify_consistency(0, 5, EMPTY_ROOT, ROOTS[5], [])
    assert not verify_consistency(0, 5, EMPTY_ROOT, ROOTS[5], [ROOTS[1]])


# ------------------------------------------------------------------ against pymerkle


def _pymerkle_tree(entries):
    from pymerkle import InmemoryTree

    t = InmemoryTree(algorithm="sha256")  # RFC 6962 hashing (0x00 leaf, 0x01 node prefixes)
    for e in entries:
        t.append_entry(e)
    return t


@pytest.fixture(scope="module")
def random_entries() -> list[bytes]:
    rng = random.Random(7)
    return [rng.randbytes(rng.randrange(0, 40)) for _ in range(70)]


def test_roots_and_audit_paths_agree_with_pymerkle(random_entries):
    theirs = _pymerkle_tree(random_entries)
    ours = MerkleTree([leaf_hash(e) for e in random_entries])
    for size in range(1, len(random_entries) + 1):
        assert ours.root(size) == theirs.get_root(size)
        for index in range(size):
            # pymerkle's path starts with the leaf itself, then the RFC 6962 audit path
            path = [bytes.fromhex(h) for h in theirs.prove_inclusion(index + 1, size).serialize()["path"]]
            assert path[0] == ours.leaf(index) and path[1:] == ours.inclusion_proof(index, size)
            assert verify_inclusion(index, size, ours.leaf(index), path[1:], theirs.get_root(size))


def test_pymerkle_accepts_the_states_our_consistency_proofs_relate(random_entries):
    from pymerkle import verify_consistency as their_verify_consistency
    from pymerkle import InvalidProof

    theirs = _pymerkle_tree(random_entries)
    ours = MerkleTree([leaf_hash(e) for e in random_entries])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for second in range(1, len(random_entries) + 1, 3):
            for first in range(1, second + 1):
                assert verify_consistency(first, second, ours.root(first), ours.root(second),
                                          ours.consistency_proof(first, second))
                proof = theirs.prove_consistency(first, second)
                their_verify_consistency(ours.root(first), ours.root(second), proof)  # raises if not
                with pytest.raises(InvalidProof):
                    their_verify_consistency(flip(ours.root(first)), ours.root(second), proof)


def test_transparency_dev_published_case_in_base64():
    """testdata/consistency happy path (1 -> 8) as transparency-dev publishes it, base64."""
    root1 = base64.b64decode("bjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0=")
    root2 = base64.b64decode("XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=")
    proof = [base64.b64decode(p) for p in ("lqKW0iTyhcZ77pPDD4owkVfw2qNdxbh+QQt4YwoJz8c=",
                                           "Xwg/ChozygdqlSeYMlgNs+DvRYS9/x9UyKNg9Q3jAx4=",
                                           "a0eq8p7jwq+a+Im8H7klTavTEXfxYjLdaqsDXKOb9uQ=")]
    assert verify_consistency(1, 8, root1, root2, proof)
    assert not verify_consistency(1, 8, root2, root1, proof)


def test_proof_sizes_grow_as_log_n():
    t = MerkleTree([leaf_hash(i.to_bytes(4, "big")) for i in range(1025)])
    assert len(t.inclusion_proof(0, 1024)) == 10 and len(t.inclusion_proof(1024, 1025)) == 1
    assert max(len(t.inclusion_proof(i)) for i in range(0, 1025, 7)) <= 11
    assert max(len(t.consistency_proof(m)) for m in range(1, 1025, 5)) <= 2 * 11
