"""Laundering typologies around one account: the AMLworld shapes, found on any GraphStore.

:func:`detect_typologies` looks at the edges around ``node_id`` (inside ``window`` when given;
each account contributes at most ``neighbor_cap`` edges in cap order) and reports every shape the
account takes part in, in :data:`TYPOLOGIES` order. Counterparties never include the account
itself; ``k`` below is ``min_fan`` (default 3).

========================  ==============================================================
fan-out                   the account pays ``k`` or more distinct accounts
fan-in                    the account is paid by ``k`` or more distinct accounts
cycle                     the shortest directed cycle through the account, 2 to 6 hops
                          (self-transfers excluded)
scatter-gather            a source s and a sink t with 2 or more distinct intermediates
                          m (s -> m -> t); the account is s, t or one of the m
gather-scatter            the account is a hub paid by 2+ accounts and paying 2+ accounts,
                          with money arriving no later than money leaves
bipartite                 a set A of 2+ payers and a set B of 2+ payees (disjoint), the
                          account on either side, every member of A paying 2+ members of B
                          and every member of B paid by 2+ members of A
stack                     a bipartite extended by a further layer before or after it
                          (3 or 4 layers of 2+ accounts each)
random                    none of the above, but the account lies on a chain of 2 or more
                          transfers labelled as laundering (followed up to 5 hops each way)
========================  ==============================================================

Accounts are listed sorted, except for ``cycle`` and ``random`` where they follow the path (and
event ids follow the path too); elsewhere event ids are sorted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from auditflow.typologies import TYPOLOGIES
from evidence_graph.store import Direction, GraphEdge, GraphStore, check_window

TYPOLOGY_NEIGHBOR_CAP = 100
MIN_FAN = 3
MAX_CYCLE_HOPS = 6
RANDOM_CHAIN_HOPS = 5


@dataclass(frozen=True, slots=True)
class TypologyMatch:
    """One laundering shape an account takes part in."""

    typology: str  # one of TYPOLOGIES
    accounts: tuple[str, ...]
    event_ids: tuple[str, ...]
    explanation: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "typology": self.typology,
            "accounts": list(self.accounts),
            "event_ids": list(self.event_ids),
            "explanation": self.explanation,
        }


class _Neighborhood:
    """Cached, windowed, capped adjacency read through ``neighbors_batch``."""

    def __init__(self, store: GraphStore, start: datetime | None, end: datetime | None, cap: int):
        self.store, self.start, self.end, self.cap = store, start, end, cap
        self._cache: dict[tuple[str, str], tuple[GraphEdge, ...]] = {}

    def edges(self, nodes: Iterable[str], direction: Direction) -> dict[str, tuple[GraphEdge, ...]]:
        nodes = list(dict.fromkeys(nodes))
        missing = sorted(n for n in nodes if (n, direction) not in self._cache)
        if missing:
            batch = self.store.neighbors_batch(missing, direction, self.start, self.end, self.cap)
            for n in missing:
                self._cache[(n, direction)] = tuple(batch.get(n, ()))
        return {n: self._cache[(n, direction)] for n in nodes}

    def parties(
        self, nodes: Iterable[str], direction: Direction
    ) -> dict[str, dict[str, list[GraphEdge]]]:
        """Per node: counterparty -> the edges with it (node itself excluded), cap order."""
        out: dict[str, dict[str, list[GraphEdge]]] = {}
        for n, edges in self.edges(nodes, direction).items():
            by: dict[str, list[GraphEdge]] = {}
            for e in edges:
                other = e.dst if direction == "out" else e.src
                if other != n:
                    by.setdefault(other, []).append(e)
            out[n] = by
        return out


def _between(nb: _Neighborhood, a: str, b: str) -> list[GraphEdge]:
    """Edges ``a -> b`` as seen from either end (the caps may keep them on one side only)."""
    seen = {e.event_id: e for e in nb.parties([a], "out")[a].get(b, [])}
    seen.update((e.event_id, e) for e in nb.parties([b], "in")[b].get(a, []))
    return sorted(seen.values(), key=lambda e: e.cap_key)


def _ids(edges: Iterable[GraphEdge]) -> tuple[str, ...]:
    return tuple(sorted({e.event_id for e in edges}))


def _fans(nb: _Neighborhood, v: str, min_fan: int) -> list[TypologyMatch]:
    found = []
    for name, direction, verb in (("fan-out", "out", "paid"), ("fan-in", "in", "was paid by")):
        parties = nb.parties([v], direction)[v]
        if len(parties) >= min_fan:
            edges = [e for es in parties.values() for e in es]
            found.append(
                TypologyMatch(
                    name,
                    tuple(sorted({v, *parties})),
                    _ids(edges),
                    f"{v} {verb} {len(parties)} distinct accounts in {len(edges)} transfers",
                )
            )
    return found


def _cycle(nb: _Neighborhood, v: str) -> list[TypologyMatch]:
    parent: dict[str, tuple[str, GraphEdge]] = {}
    seen = {v}
    frontier = [v]
    for hop in range(1, MAX_CYCLE_HOPS + 1):
        if not frontier:
            break
        payees = nb.parties(frontier, "out")
        closing = [(u, payees[u][v][0]) for u in frontier if hop >= 2 and v in payees[u]]
        if closing:
            u, last = closing[0]  # frontier is sorted: the smallest account closes the cycle
            path_nodes, path_edges = [u], [last]
            while u != v:
                u, e = parent[u]
                path_nodes.append(u)
                path_edges.append(e)
            path_nodes.reverse()
            path_edges.reverse()
            return [
                TypologyMatch(
                    "cycle",
                    tuple(path_nodes),
                    tuple(e.event_id for e in path_edges),
                    f"money from {v} returns to it in {hop} hops via {len(path_nodes) - 1} accounts",
                )
            ]
        nxt: list[str] = []
        for u in frontier:
            for w, es in sorted(payees[u].items()):
                if w not in seen:
                    seen.add(w)
                    parent[w] = (u, es[0])
                    nxt.append(w)
        frontier = sorted(nxt)
    return []


def _sg_candidates(nb: _Neighborhood, v: str) -> list[tuple[str, frozenset[str], str]]:
    """(source, intermediates, sink) triples with 2+ intermediates, ``v`` in any role."""
    cands = []
    # v as source: v -> m -> t
    mids = nb.parties([v], "out")[v]
    per_t: dict[str, set[str]] = {}
    for m, outs in nb.parties(mids, "out").items():
        for t in outs:
            if t != v:
                per_t.setdefault(t, set()).add(m)
    cands += [(v, frozenset(ms), t) for t, ms in per_t.items() if len(ms) >= 2]
    # v as sink: s -> m -> v
    mids = nb.parties([v], "in")[v]
    per_s: dict[str, set[str]] = {}
    for m, ins in nb.parties(mids, "in").items():
        for s in ins:
            if s != v:
                per_s.setdefault(s, set()).add(m)
    cands += [(s, frozenset(ms), v) for s, ms in per_s.items() if len(ms) >= 2]
    # v as an intermediate: s -> v -> t and s -> m -> t for some other m
    payers = sorted(nb.parties([v], "in")[v])
    payees = sorted(nb.parties([v], "out")[v])
    if payers and payees:
        s_out = nb.parties(payers, "out")
        t_in = nb.parties(payees, "in")
        for s in payers:
            for t in payees:
                if s != t:
                    ms = (set(s_out[s]) & set(t_in[t])) - {s, t}
                    if len(ms) >= 2:
                        cands.append((s, frozenset(ms), t))
    return cands


def _scatter_gather(nb: _Neighborhood, v: str) -> list[TypologyMatch]:
    cands = _sg_candidates(nb, v)
    if not cands:
        return []
    s, ms, t = min(cands, key=lambda c: (-len(c[1]), c[0], c[2]))
    mids = sorted(ms)
    edges = [e for m in mids for e in _between(nb, s, m) + _between(nb, m, t)]
    return [
        TypologyMatch(
            "scatter-gather",
            tuple(sorted({s, t, *mids})),
            _ids(edges),
            f"{s} scatters to {len(mids)} accounts that all pay {t}",
        )
    ]


def _gather_scatter(nb: _Neighborhood, v: str) -> list[TypologyMatch]:
    ins = nb.parties([v], "in")[v]
    outs = nb.parties([v], "out")[v]
    if len(ins) < 2 or len(outs) < 2:
        return []
    in_edges = [e for es in ins.values() for e in es]
    out_edges = [e for es in outs.values() for e in es]
    if min(e.timestamp for e in in_edges) > max(e.timestamp for e in out_edges):
        return []
    return [
        TypologyMatch(
            "gather-scatter",
            tuple(sorted({v, *ins, *outs})),
            _ids(in_edges + out_edges),
            f"{v} gathers from {len(ins)} accounts and scatters to {len(outs)}",
        )
    ]


def _bipartite_from(nb: _Neighborhood, v: str, side: str) -> tuple[list[str], list[str]] | None:
    """(A, B) with ``v`` in A (``side="left"``) or in B (``side="right"``), else None."""
    fwd: Direction = "out" if side == "left" else "in"
    back: Direction = "in" if side == "left" else "out"
    far = set(nb.parties([v], fwd)[v])  # v's counterparties on the other side
    if len(far) < 2:
        return None
    back_of_far = nb.parties(sorted(far), back)
    count: dict[str, int] = {}
    for b in far:
        for u in back_of_far[b]:
            count[u] = count.get(u, 0) + 1
    near = {v} | {u for u, c in count.items() if c >= 2 and u != v and u not in far}
    far = {b for b in far if len(set(back_of_far[b]) & near) >= 2}
    fwd_of_near = nb.parties(sorted(near), fwd)
    near = {a for a in near if len(set(fwd_of_near[a]) & far) >= 2}
    far = {b for b in far if len(set(back_of_far[b]) & near) >= 2}
    if v not in near or len(near) < 2 or len(far) < 2 or near & far:
        return None
    left, right = (near, far) if side == "left" else (far, near)
    return sorted(left), sorted(right)


def _layer_edges(nb: _Neighborhood, layers: Sequence[Sequence[str]]) -> list[GraphEdge]:
    edges = []
    for a_layer, b_layer in zip(layers, layers[1:]):
        payees = nb.parties(a_layer, "out")
        bset = set(b_layer)
        edges += [e for a in a_layer for b, es in payees[a].items() if b in bset for e in es]
    return edges


def _extend(nb: _Neighborhood, layer: Sequence[str], used: set[str], direction: Direction) -> list[str]:
    count: dict[str, int] = {}
    for parties in nb.parties(layer, direction).values():
        for c in parties:
            if c not in used:
                count[c] = count.get(c, 0) + 1
    nxt = sorted(c for c, k in count.items() if k >= 2)
    return nxt if len(nxt) >= 2 else []


def _bipartite_and_stack(nb: _Neighborhood, v: str) -> list[TypologyMatch]:
    pairs = []
    for side in ("left", "right"):
        found = _bipartite_from(nb, v, side)
        if found is not None and found not in pairs:
            pairs.append(found)
    matches = []
    for a, b in pairs:
        matches.append(
            TypologyMatch(
                "bipartite",
                tuple(sorted({*a, *b})),
                _ids(_layer_edges(nb, [a, b])),
                f"{len(a)} accounts each pay several of the same {len(b)} accounts",
            )
        )
    for a, b in pairs:
        used = {*a, *b}
        after = _extend(nb, b, used, "out")
        before = _extend(nb, a, used | set(after), "in")
        layers = [lay for lay in (before, a, b, after) if lay]
        if len(layers) >= 3:
            accounts = tuple(sorted({x for lay in layers for x in lay}))
            matches.append(
                TypologyMatch(
                    "stack",
                    accounts,
                    _ids(_layer_edges(nb, layers)),
                    f"money moves through {len(layers)} layers of "
                    f"{', '.join(str(len(lay)) for lay in layers)} accounts",
                )
            )
            break
    return matches


def _random_chain(nb: _Neighborhood, v: str) -> list[TypologyMatch]:
    def follow(direction: Direction) -> list[GraphEdge]:
        path, node, seen = [], v, {v}
        for _ in range(RANDOM_CHAIN_HOPS):
            step = next(
                (
                    e
                    for e in nb.edges([node], direction)[node]
                    if e.is_laundering and e.other_end(node) not in seen
                ),
                None,
            )
            if step is None:
                break
            path.append(step)
            node = step.other_end(node)
            seen.add(node)
        return path

    back = follow("in")
    fwd = follow("out")
    # the two halves may meet; keep the backward half only up to the first account reused
    fwd_nodes = {e.dst for e in fwd}
    kept_back: list[GraphEdge] = []
    for e in back:
        if e.src in fwd_nodes:
            break
        kept_back.append(e)
    chain = list(reversed(kept_back)) + fwd
    if len(chain) < 2:
        return []
    accounts = [chain[0].src] + [e.dst for e in chain]
    return [
        TypologyMatch(
            "random",
            tuple(accounts),
            tuple(e.event_id for e in chain),
            f"{v} lies on a chain of {len(chain)} laundering-labelled transfers matching no other shape",
        )
    ]


def detect_typologies(
    store: GraphStore,
    node_id: str,
    window: tuple[datetime | None, datetime | None] | None = None,
    *,
    min_fan: int = MIN_FAN,
    neighbor_cap: int = TYPOLOGY_NEIGHBOR_CAP,
) -> list[TypologyMatch]:
    """Every typology ``node_id`` takes part in (see the module docstring), in TYPOLOGIES order."""
    if min_fan < 2:
        raise ValueError(f"min_fan={min_fan!r}: expected at least 2")
    if neighbor_cap < 1:
        raise ValueError(f"neighbor_cap={neighbor_cap!r}: expected a positive int")
    start, end = window if window is not None else (None, None)
    check_window(start, end)
    nb = _Neighborhood(store, start, end, neighbor_cap)
    matches = [
        *_fans(nb, node_id, min_fan),
        *_cycle(nb, node_id),
        *_scatter_gather(nb, node_id),
        *_gather_scatter(nb, node_id),
        *_bipartite_and_stack(nb, node_id),
    ]
    if not matches:
        matches = _random_chain(nb, node_id)
    order = {name: i for i, name in enumerate(TYPOLOGIES)}
    return sorted(matches, key=lambda m: (order[m.typology], m.accounts, m.event_ids))
