"""Exact path-dependent TreeSHAP (Lundberg et al. 2018, Algorithm 2) in float64 over an xgboost
model's own trees, so that for every row ``sum(contributions) + expected_value == margin`` holds to
float64 rounding (about 1e-12), where xgboost's and shap's float32 outputs agree only to about
1e-5 on margins near 10.

The trees are read from the model's JSON (split feature, float32 threshold, default direction for
missing values, leaf values, covers = hessian sums). Rows are routed exactly as xgboost routes
them: features and thresholds compared in float32, ``x < threshold`` goes left, NaN takes the
default direction. The margin is the base margin (logit of ``base_score``) plus the leaf values,
summed in float64; the baseline (``expected_value``) is the cover-weighted mean of each tree's
leaves, plus the base margin.

Two kernels give the same values (to float64 rounding, tested against each other and against a
brute-force Shapley sum): Algorithm 2 itself (``algorithm="paths"``, O(leaves x depth^2) per row
and tree), and by default the per-leaf tables of Fast TreeSHAP v2 (Yang 2021): for each leaf and
each subset of its path's unique features, the Shapley-weighted sum of zero-fraction products is
computed once when the model is loaded (2^depth values per leaf), so that a row costs O(depth)
per leaf -- about 3x the rows per second at depth 6. Paths with more than
:data:`MAX_TABLE_DEPTH` unique features use Algorithm 2.

Compiled with numba (no recursion; cached), releasing the GIL: ``threads`` > 1 explains chunks of
rows on threads (numba's own parallel loops are not used). :class:`TreeEnsemble` is built once per
model.

>>> import xgboost as xgb
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(300, 4)); y = (X[:, 0] + X[:, 1] * X[:, 2] > 0.5).astype(int)
>>> b = xgb.train({"objective": "binary:logistic", "max_depth": 4}, xgb.DMatrix(X, label=y), 20)
>>> ens = TreeEnsemble.from_booster(b)
>>> phi, margin = ens.shap_values(X.astype(np.float32))
>>> float(np.abs(phi.sum(1) + ens.expected_value - margin).max()) < 1e-9
True
>>> want = b.predict(xgb.DMatrix(X.astype(np.float32)), pred_contribs=True)
>>> float(np.abs(want[:, :-1] - phi).max()) < 1e-4
True
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numba
import numpy as np


@numba.njit(cache=True, error_model="numpy")
def _extend(feat, zero, one, pw, off, depth, zf, of, fi):
    feat[off + depth] = fi
    zero[off + depth] = zf
    one[off + depth] = of
    pw[off + depth] = 1.0 if depth == 0 else 0.0
    for i in range(depth - 1, -1, -1):
        pw[off + i + 1] += of * pw[off + i] * (i + 1) / (depth + 1)
        pw[off + i] = zf * pw[off + i] * (depth - i) / (depth + 1)


@numba.njit(cache=True, error_model="numpy")
def _unwind(feat, zero, one, pw, off, depth, idx):
    of = one[off + idx]
    zf = zero[off + idx]
    nxt = pw[off + depth]
    for i in range(depth - 1, -1, -1):
        if of != 0.0:
            tmp = pw[off + i]
            pw[off + i] = nxt * (depth + 1) / ((i + 1) * of)
            nxt = tmp - pw[off + i] * zf * (depth - i) / (depth + 1)
        else:
            pw[off + i] = pw[off + i] * (depth + 1) / (zf * (depth - i))
    for i in range(idx, depth):
        feat[off + i] = feat[off + i + 1]
        zero[off + i] = zero[off + i + 1]
        one[off + i] = one[off + i + 1]


@numba.njit(cache=True, error_model="numpy")
def _unwound_sum(zero, one, pw, off, depth, idx):
    of = one[off + idx]
    zf = zero[off + idx]
    nxt = pw[off + depth]
    total = 0.0
    for i in range(depth - 1, -1, -1):
        if of != 0.0:
            tmp = nxt * (depth + 1) / ((i + 1) * of)
            total += tmp
            nxt = pw[off + i] - tmp * zf * ((depth - i) / (depth + 1))
        else:
            total += (pw[off + i] / zf) / ((depth - i) / (depth + 1))
    return total


@numba.njit(cache=True, error_model="numpy")
def _tree(root, x, left, right, fidx, thr, dleft, value, cover, phi, feat, zero, one, pw,
          st_node, st_off, st_depth, st_zf, st_of, st_fi):
    """Algorithm 2's recursion as an explicit stack (a child's path lives right after its parent's,
    which stays intact until both children are done)."""
    top = 0
    st_node[0], st_off[0], st_depth[0], st_zf[0], st_of[0], st_fi[0] = root, 0, 0, 1.0, 1.0, -1
    while top >= 0:
        node, parent_off, depth = st_node[top], st_off[top], st_depth[top]
        pzf, pof, pfi = st_zf[top], st_of[top], st_fi[top]
        top -= 1
        off = parent_off + depth
        for i in range(depth):
            feat[off + i] = feat[parent_off + i]
            zero[off + i] = zero[parent_off + i]
            one[off + i] = one[parent_off + i]
            pw[off + i] = pw[parent_off + i]
        _extend(feat, zero, one, pw, off, depth, pzf, pof, pfi)
        if left[node] < 0:
            for i in range(1, depth + 1):
                w = _unwound_sum(zero, one, pw, off, depth, i)
                phi[feat[off + i]] += w * (one[off + i] - zero[off + i]) * value[node]
            continue
        f = fidx[node]
        v = x[f]
        if math.isnan(v):
            go_left = dleft[node]
        else:
            go_left = v < thr[node]
        hot = left[node] if go_left else right[node]
        cold = right[node] if go_left else left[node]
        w = cover[node]
        izf = 1.0
        iof = 1.0
        idx = 0
        while idx <= depth:
            if feat[off + idx] == f:
                break
            idx += 1
        if idx != depth + 1:
            izf = zero[off + idx]
            iof = one[off + idx]
            _unwind(feat, zero, one, pw, off, depth, idx)
            depth -= 1
        top += 1
        st_node[top], st_off[top], st_depth[top] = cold, off, depth + 1
        st_zf[top], st_of[top], st_fi[top] = cover[cold] / w * izf, 0.0, f
        top += 1
        st_node[top], st_off[top], st_depth[top] = hot, off, depth + 1
        st_zf[top], st_of[top], st_fi[top] = cover[hot] / w * izf, iof, f


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _shap_batch(X, roots, left, right, fidx, thr, dleft, value, cover, max_depth, n_features):
    n = X.shape[0]
    phi = np.zeros((n, n_features), dtype=np.float64)
    margin = np.zeros(n, dtype=np.float64)
    size = (max_depth + 2) * (max_depth + 3) // 2 + 8
    for r in range(n):
        x = X[r]
        feat = np.zeros(size, dtype=np.int64)
        zero = np.zeros(size, dtype=np.float64)
        one = np.zeros(size, dtype=np.float64)
        pw = np.zeros(size, dtype=np.float64)
        stack = 2 * max_depth + 4
        st_node = np.zeros(stack, dtype=np.int64)
        st_off = np.zeros(stack, dtype=np.int64)
        st_depth = np.zeros(stack, dtype=np.int64)
        st_zf = np.zeros(stack, dtype=np.float64)
        st_of = np.zeros(stack, dtype=np.float64)
        st_fi = np.zeros(stack, dtype=np.int64)
        row = phi[r]
        total = 0.0
        for t in range(roots.shape[0]):
            root = roots[t]
            _tree(root, x, left, right, fidx, thr, dleft, value, cover, row, feat, zero, one, pw,
                  st_node, st_off, st_depth, st_zf, st_of, st_fi)
            node = root
            while left[node] >= 0:  # the leaf this row reaches, for the margin
                v = x[fidx[node]]
                if math.isnan(v):
                    node = left[node] if dleft[node] else right[node]
                else:
                    node = left[node] if v < thr[node] else right[node]
            total += value[node]
        margin[r] = total
    return phi, margin


@numba.njit(cache=True, error_model="numpy")
def _leaf_tables(z, z_off, n_unique, value, g_off, g):
    """Fill, per leaf, ``g[g_off + U] = value * sum over S of U, |S| < d, of
    |S|! (d-1-|S|)! / d! * prod(z_j, j not in S)``, for every subset ``U`` (a bit mask) of the
    leaf's ``d`` unique path features with zero fractions ``z``."""
    for leaf in range(n_unique.shape[0]):
        d = n_unique[leaf]
        if d == 0:
            continue
        zo = z_off[leaf]
        full = (1 << d) - 1
        prodz = np.ones(1 << d, dtype=np.float64)  # prod of z_j over j not in S
        for s in range(1 << d):
            p = 1.0
            for j in range(d):
                if not (s >> j) & 1:
                    p *= z[zo + j]
            prodz[s] = p
        w = np.empty(d, dtype=np.float64)  # Shapley weight of a coalition of size s among d
        for s in range(d):
            w[s] = math.exp(math.lgamma(s + 1) + math.lgamma(d - s) - math.lgamma(d + 1))
        for u in range(full):  # the full set is never looked up
            total = 0.0
            sub = u
            while True:
                c = 0
                t = sub
                while t:
                    t &= t - 1
                    c += 1
                if c < d:
                    total += w[c] * prodz[sub]
                if sub == 0:
                    break
                sub = (sub - 1) & u
            g[g_off[leaf] + u] = value[leaf] * total


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _shap_batch_tables(X, node_lo, node_hi, leaf_lo, leaf_hi, left, right, fidx, thr, dleft,
                       leaf_value, n_unique, feat, r, z_off, path_off, path_len, path_node,
                       path_left, path_bit, g_off, g, n_features, max_nodes):
    """TreeSHAP from the per-leaf tables (Yang 2021, "Fast TreeSHAP" v2): per row and tree, each
    internal node's direction once, then per leaf the set ``U`` of its unique features whose every
    split the row follows, and per feature ``k`` on the path ``phi_k += r_k * g[U - k]`` when ``k``
    is in ``U`` (``r_k = (1 - z_k) / z_k``), else ``phi_k -= g[U]``: the same sums as
    Algorithm 2, in O(depth) per leaf instead of O(depth^2)."""
    n = X.shape[0]
    phi = np.zeros((n, n_features), dtype=np.float64)
    margin = np.zeros(n, dtype=np.float64)
    go = np.zeros(max_nodes, dtype=np.bool_)
    for row in range(n):
        x = X[row]
        out = phi[row]
        total = 0.0
        for t in range(node_lo.shape[0]):
            lo = node_lo[t]
            for node in range(lo, node_hi[t]):
                if left[node] >= 0:
                    v = x[fidx[node]]
                    go[node - lo] = dleft[node] if math.isnan(v) else v < thr[node]
            for leaf in range(leaf_lo[t], leaf_hi[t]):
                d = n_unique[leaf]
                full = (1 << d) - 1
                u = full
                po = path_off[leaf]
                for p in range(path_len[leaf]):
                    if go[path_node[po + p] - lo] != path_left[po + p]:
                        u &= ~(1 << path_bit[po + p])
                if u == full:
                    total += leaf_value[leaf]
                    if d == 0:
                        continue
                zo = z_off[leaf]
                base = g_off[leaf]
                for k in range(d):
                    if (u >> k) & 1:
                        out[feat[zo + k]] += r[zo + k] * g[base + (u ^ (1 << k))]
                    else:
                        out[feat[zo + k]] -= g[base + u]
        margin[row] = total
    return phi, margin


#: Trees whose paths carry more unique features than this are explained by Algorithm 2 (the
#: per-leaf tables hold 2^d values).
MAX_TABLE_DEPTH = 12


@dataclass(frozen=True)
class _LeafTables:
    """The per-leaf tables of :func:`_shap_batch_tables`, flat over every tree's leaves."""

    node_lo: np.ndarray
    node_hi: np.ndarray
    leaf_lo: np.ndarray
    leaf_hi: np.ndarray
    leaf_value: np.ndarray
    n_unique: np.ndarray
    feat: np.ndarray
    r: np.ndarray
    z_off: np.ndarray
    path_off: np.ndarray
    path_len: np.ndarray
    path_node: np.ndarray
    path_left: np.ndarray
    path_bit: np.ndarray
    g_off: np.ndarray
    g: np.ndarray
    max_nodes: int

    @classmethod
    def build(cls, roots, left, right, feature, value, cover) -> _LeafTables | None:
        """The tables, or None when a path has more than :data:`MAX_TABLE_DEPTH` unique features
        or a zero fraction of 0 (a child without cover)."""
        ends = [*roots.tolist()[1:], left.size]
        node_lo, node_hi, leaf_lo, leaf_hi = [], [], [], []
        leaf_value, n_unique, feat, zs, z_off = [], [], [], [], []
        path_off, path_len, path_node, path_left, path_bit = [], [], [], [], []
        for root, end in zip(roots.tolist(), ends):
            node_lo.append(root)
            node_hi.append(end)
            leaf_lo.append(len(leaf_value))
            stack = [(root, ())]  # (node, ((parent, went_left), ...)) from the root
            while stack:
                node, path = stack.pop()
                if left[node] >= 0:
                    stack.append((int(right[node]), (*path, (node, False))))
                    stack.append((int(left[node]), (*path, (node, True))))
                    continue
                order: dict[int, int] = {}  # feature -> its bit, in order of first split
                zf: list[float] = []
                for parent, went_left in path:
                    f = int(feature[parent])
                    child = int(left[parent] if went_left else right[parent])
                    ratio = float(cover[child]) / float(cover[parent])
                    if f not in order:
                        order[f] = len(order)
                        zf.append(1.0)
                    zf[order[f]] *= ratio
                if len(order) > MAX_TABLE_DEPTH or any(v <= 0.0 for v in zf):
                    return None
                leaf_value.append(float(value[node]))
                n_unique.append(len(order))
                z_off.append(len(zs))
                feat.extend(order)
                zs.extend(zf)
                path_off.append(len(path_node))
                path_len.append(len(path))
                for parent, went_left in path:
                    path_node.append(parent)
                    path_left.append(went_left)
                    path_bit.append(order[int(feature[parent])])
            leaf_hi.append(len(leaf_value))
        i64 = lambda a: np.asarray(a, dtype=np.int64)  # noqa: E731
        z = np.asarray(zs, dtype=np.float64)
        n_u = i64(n_unique)
        g_off = i64(np.concatenate([[0], np.cumsum(1 << n_u)[:-1]])) if n_u.size else i64([])
        g = np.zeros(int((1 << n_u).sum()), dtype=np.float64)
        lv = np.asarray(leaf_value, dtype=np.float64)
        zo = i64(z_off)
        _leaf_tables(z, zo, n_u, lv, g_off, g)
        return cls(i64(node_lo), i64(node_hi), i64(leaf_lo), i64(leaf_hi), lv, n_u,
                   i64(feat), (1.0 - z) / z, zo, i64(path_off), i64(path_len), i64(path_node),
                   np.asarray(path_left, dtype=np.bool_), i64(path_bit), g_off, g,
                   int(max(h - lo for lo, h in zip(node_lo, node_hi))))


def _expected(root: int, left: np.ndarray, right: np.ndarray, value: np.ndarray, cover: np.ndarray) -> float:
    """Cover-weighted mean leaf value (the ratios TreeSHAP uses), iteratively."""
    total, stack = 0.0, [(root, 1.0)]
    while stack:
        node, p = stack.pop()
        if left[node] < 0:
            total += p * value[node]
        else:
            w = cover[node]
            stack.append((int(left[node]), p * cover[left[node]] / w))
            stack.append((int(right[node]), p * cover[right[node]] / w))
    return total


@dataclass(frozen=True)
class TreeEnsemble:
    """An xgboost binary:logistic model's trees as flat arrays (node ids offset per tree)."""

    roots: np.ndarray
    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray  # float32, compared with float32 features as xgboost does
    default_left: np.ndarray
    value: np.ndarray  # leaf values (float64 of xgboost's float32)
    cover: np.ndarray
    max_depth: int
    n_features: int
    base_margin: float
    expected_value: float
    tables: _LeafTables | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_booster(cls, booster) -> TreeEnsemble:
        model = json.loads(bytes(booster.save_raw(raw_format="json")))
        learner = model["learner"]
        if learner["objective"]["name"] != "binary:logistic":
            raise ValueError(f"TreeSHAP here explains binary:logistic models, not {learner['objective']['name']}")
        trees = learner["gradient_booster"]["model"]["trees"]
        n_features = int(learner["learner_model_param"]["num_feature"])
        base = float(np.float32(learner["learner_model_param"]["base_score"].strip("[]")))
        base_margin = float(np.log(np.float64(base) / (1.0 - np.float64(base))))
        parts: dict[str, list] = {k: [] for k in ("left", "right", "feature", "threshold", "dleft", "value", "cover")}
        roots, offset, max_depth = [], 0, 0
        for t in trees:
            if any(t.get("split_type", [])) or t.get("categories"):
                raise ValueError("categorical splits are not supported")
            left = np.asarray(t["left_children"], dtype=np.int64)
            right = np.asarray(t["right_children"], dtype=np.int64)
            leaf = left < 0
            parts["left"].append(np.where(leaf, -1, left + offset))
            parts["right"].append(np.where(leaf, -1, right + offset))
            parts["feature"].append(np.asarray(t["split_indices"], dtype=np.int64))
            parts["threshold"].append(np.asarray(t["split_conditions"], dtype=np.float32))
            parts["dleft"].append(np.asarray(t["default_left"], dtype=np.bool_))
            parts["value"].append(np.where(leaf, np.asarray(t["split_conditions"], dtype=np.float32), 0.0))
            parts["cover"].append(np.asarray(t["sum_hessian"], dtype=np.float64))
            roots.append(offset)
            max_depth = max(max_depth, _depth(left, right))
            offset += left.size
        arrays = {k: np.ascontiguousarray(np.concatenate(v)) for k, v in parts.items()}
        arrays["value"] = arrays["value"].astype(np.float64)
        roots_arr = np.asarray(roots, dtype=np.int64)
        expected = base_margin + sum(
            _expected(int(r), arrays["left"], arrays["right"], arrays["value"], arrays["cover"]) for r in roots_arr)
        tables = _LeafTables.build(roots_arr, arrays["left"], arrays["right"], arrays["feature"],
                                   arrays["value"], arrays["cover"])
        return cls(roots_arr, arrays["left"], arrays["right"], arrays["feature"], arrays["threshold"],
                   arrays["dleft"], arrays["value"], arrays["cover"], max_depth, n_features, base_margin,
                   float(expected), tables)

    def shap_values(self, X: np.ndarray, threads: int = 1, algorithm: str = "auto") -> tuple[np.ndarray, np.ndarray]:
        """``(contributions (n, d), margin (n,))`` in log-odds, float64, for float32 rows.

        ``algorithm``: ``"tables"`` (per-leaf tables, the default when the trees allow them),
        ``"paths"`` (Algorithm 2), or ``"auto"``. Both give the same values to float64 rounding."""
        Xf = np.ascontiguousarray(X, dtype=np.float32)
        if Xf.ndim != 2 or Xf.shape[1] != self.n_features:
            raise ValueError(f"expected shape (n, {self.n_features}), got {Xf.shape}")
        if algorithm not in ("auto", "tables", "paths"):
            raise ValueError(f"algorithm={algorithm!r}: expected 'auto', 'tables' or 'paths'")
        if algorithm == "tables" and self.tables is None:
            raise ValueError(f"this model's paths carry more than {MAX_TABLE_DEPTH} unique features "
                             "(or a child without cover): no per-leaf tables")
        if Xf.shape[0] == 0:
            return np.empty((0, self.n_features)), np.empty(0)
        tb = self.tables if algorithm != "paths" else None
        if tb is not None:
            args = (tb.node_lo, tb.node_hi, tb.leaf_lo, tb.leaf_hi, self.left, self.right, self.feature,
                    self.threshold, self.default_left, tb.leaf_value, tb.n_unique, tb.feat,
                    tb.r, tb.z_off, tb.path_off, tb.path_len, tb.path_node, tb.path_left, tb.path_bit,
                    tb.g_off, tb.g, self.n_features, tb.max_nodes)
            kernel = _shap_batch_tables
        else:
            args = (self.roots, self.left, self.right, self.feature, self.threshold, self.default_left,
                    self.value, self.cover, self.max_depth, self.n_features)
            kernel = _shap_batch
        if threads <= 1 or Xf.shape[0] < 64:
            phi, leaves = kernel(Xf, *args)
        else:
            from concurrent.futures import ThreadPoolExecutor

            chunks = np.array_split(Xf, threads)
            with ThreadPoolExecutor(threads) as pool:
                parts = list(pool.map(lambda c: kernel(np.ascontiguousarray(c), *args), chunks))
            phi = np.vstack([p for p, _ in parts])
            leaves = np.concatenate([m for _, m in parts])
        return phi, leaves + self.base_margin


def _depth(left: np.ndarray, right: np.ndarray) -> int:
    best, stack = 0, [(0, 0)]
    while stack:
        node, d = stack.pop()
        if left[node] < 0:
            best = max(best, d)
        else:
            stack.append((int(left[node]), d + 1))
            stack.append((int(right[node]), d + 1))
    return best
