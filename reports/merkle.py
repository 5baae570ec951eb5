"""RFC 6962 / RFC 9162 Merkle tree hashing, inclusion and consistency proofs (SHA-256).

Leaf hash ``SHA-256(0x00 || data)``, node hash ``SHA-256(0x01 || left || right)``, the root of
``n`` leaves split at the largest power of two below ``n`` (RFC 9162 section 2.1.1). Proofs are
generated as RFC 9162 sections 2.1.3.1 (``PATH``) and 2.1.4.1 (``SUBPROOF``) define them and
checked with the verification algorithms of sections 2.1.3.2 and 2.1.4.2, so a proof made here
verifies with any RFC 6962 implementation (Certificate Transparency logs, Trillian, pymerkle)
and theirs here.

Written out rather than taken from a library: the algorithms are short and fully specified, the
log must live in our own append-only file, and the test suite checks them against the RFC's
reference vectors and an independent implementation (``pymerkle``).

:class:`MerkleTree` keeps every complete, aligned subtree hash as leaves are appended, so a
subtree root, an inclusion proof and a consistency proof cost O(log n) hashes whatever the
size.

>>> t = MerkleTree()
>>> for data in (b"", b"\\x00", b"\\x10"):
...     _ = t.append(leaf_hash(data))
>>> t.root().hex()
'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77'
>>> verify_inclusion(2, 3, leaf_hash(b"\\x10"), t.inclusion_proof(2), t.root())
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n`` >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


class MerkleTree:
    """An append-only RFC 6962 tree over leaf hashes."""

    def __init__(self, leaf_hashes: Sequence[bytes] = ()) -> None:
        self._levels: list[list[bytes]] = [[]]  # _levels[k][i]: root of leaves [i*2^k, (i+1)*2^k)
        for h in leaf_hashes:
            self.append(h)

    @property
    def size(self) -> int:
        return len(self._levels[0])

    def __len__(self) -> int:
        return self.size

    def leaf(self, index: int) -> bytes:
        return self._levels[0][index]

    def append(self, leaf: bytes) -> int:
        """Add a leaf hash; returns its index."""
        if len(leaf) != HASH_SIZE:
            raise ValueError(f"a leaf hash has {HASH_SIZE} bytes, got {len(leaf)}")
        self._levels[0].append(leaf)
        level, h = 0, leaf
        while len(self._levels[level]) % 2 == 0:  # a subtree of 2^(level+1) leaves is complete
            h = node_hash(self._levels[level][-2], h)
            level += 1
            if level == len(self._levels):
                self._levels.append([])
            self._levels[level].append(h)
        return self.size - 1

    def _subtree(self, start: int, end: int) -> bytes:
        """MTH(D[start:end]); ``start`` is a multiple of the largest power of two <= end-start,
        which every range the RFC's recursions ask for is."""
        n = end - start
        if n & (n - 1) == 0:  # a complete subtree: stored
            return self._levels[n.bit_length() - 1][start >> (n.bit_length() - 1)]
        k = _split(n)
        return node_hash(self._subtree(start, start + k), self._subtree(start + k, end))

    def root(self, size: int | None = None) -> bytes:
        """The tree hash of the first ``size`` leaves (all by default)."""
        size = self.size if size is None else size
        if not 0 <= size <= self.size:
            raise ValueError(f"tree size {size} outside 0..{self.size}")
        return EMPTY_ROOT if size == 0 else self._subtree(0, size)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """The audit path of leaf ``index`` in the tree of the first ``size`` leaves."""
        size = self.size if size is None else size
        if not 0 <= index < size <= self.size:
            raise ValueError(f"no leaf {index} in a tree of {size} (log has {self.size})")
        proof: list[bytes] = []
        start, end, m = 0, size, index
        while end - start > 1:  # PATH(m, D[start:end]), iteratively; the path is built leaf-up
            k = _split(end - start)
            if m < k:
                proof.append(self._subtree(start + k, end))
                end = start + k
            else:
                proof.append(self._subtree(start, start + k))
                start, m = start + k, m - k
        return proof[::-1]

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> list[bytes]:
        """The proof that the first ``old_size`` leaves are a prefix of the first ``new_size``."""
        new_size = self.size if new_size is None else new_size
        if not 0 <= old_size <= new_size <= self.size:
            raise ValueError(f"no consistency proof from {old_size} to {new_size} (log has {self.size})")
        if old_size == 0 or old_size == new_size:
            return []
        proof: list[bytes] = []
        start, end, m, complete = 0, new_size, old_size, True
        while True:  # SUBPROOF(m, D[start:end], complete)
            n = end - start
            if m == n:
                if not complete:
                    proof.append(self._subtree(start, end))
                break
            k = _split(n)
            if m <= k:
                proof.append(self._subtree(start + k, end))
                end = start + k
            else:
                proof.append(self._subtree(start, start + k))
                start, m, complete = start + k, m - k, False
        return proof[::-1]


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes) -> bool:
    """RFC 9162 section 2.1.3.2: does ``proof`` show ``leaf`` at ``index`` in the tree of ``size``
    leaves whose root is ``root``? Every element must be used; extra or missing ones fail."""
    if not 0 <= index < size or any(len(p) != HASH_SIZE for p in proof):
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(old_size: int, new_size: int, old_root: bytes, new_root: bytes,
                       proof: Sequence[bytes]) -> bool:
    """RFC 9162 section 2.1.4.2: is the tree of ``old_size`` leaves (``old_root``) a prefix of the
    tree of ``new_size`` leaves (``new_root``)? The proof must use the second tree fully (``sn``
    reaches 0); equal sizes need an empty proof and equal roots, an empty first tree an empty
    proof."""
    if not 0 <= old_size <= new_size or any(len(p) != HASH_SIZE for p in proof):
        return False
    if old_size == new_size:
        return not proof and old_root == new_root
    if old_size == 0:
        return not proof and old_root == EMPTY_ROOT
    if not proof:
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # a power of two: the old root is the first node
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root
