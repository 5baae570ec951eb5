"""The money trail (:mod:`evidence_graph.trail`): pro-rata attribution on hand-built flows against
values worked out by hand (split, merge, mixed funds, cycles, upstream over two hops, a minute
shared by a transfer in and one out), what is dropped and cut, the headline, every backend, and a
brute force over random graphs that tracks, for every unit of money, every transfer it crossed."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from auditflow.money import Money
from auditflow.records import MoneyTrail
from evidence_graph import NetworkxGraphStore
from evidence_graph.follow import UNBOUNDED
from evidence_graph.store import GraphEdge
from evidence_graph.testing import acct, tx
from evidence_graph.trail import flow_order, money_trail


def usd(dollars: float) -> Money:
    return Money("US Dollar", round(dollars * 100))


class Graph:
    """A store holding ``events``, and the trail of one of them."""

    def __init__(self, *events) -> None:
        self.store = NetworkxGraphStore()
        self.store.add_transactions(list(events))
        self.events = {e.event_id: e for e in events}

    def trail(self, event_id: str, **kw) -> MoneyTrail:
        return money_trail(self.store, self.events[event_id], **kw)


def received(trail: MoneyTrail, name: str, side: str | None = None) -> int:
    rows = [a for a in trail.accounts if a.node_id == acct(name) and (side is None or a.side == side)]
    assert len(rows) == 1, rows
    return rows[0].received_cents


def row(trail: MoneyTrail, name: str, side: str):
    return next(a for a in trail.accounts if a.node_id == acct(name) and a.side == side)


def test_a_split_passes_the_alerted_money_on_in_full() -> None:
    g = Graph(tx("alert", "A", "M", 1, amount=usd(1000)), tx("o1", "M", "B", 2, amount=usd(600)),
                  tx("o2", "M", "C", 3, amount=usd(400)))
    t = g.trail("alert")
    assert (received(t, "B"), received(t, "C")) == (60_000, 40_000)
    assert row(t, "M", "receiver").held_cents == 0
    assert {f.event_id: f.traced_cents for f in t.flows} == {"alert": 100_000, "o1": 60_000, "o2": 40_000}


def test_mixed_funds_carry_the_traced_share_of_the_pool() -> None:
    # M holds 3,000 clean, then 1,000 alerted: a quarter of the 2,000 sent to B is traced (500);
    # 500 traced of 2,000 stay, 4,000 clean arrive, the 6,000 sent to C carry the 500 left
    g = Graph(tx("clean", "X", "M", 0, amount=usd(3000)), tx("alert", "A", "M", 1, amount=usd(1000)),
                  tx("o1", "M", "B", 2, amount=usd(2000)), tx("clean2", "Y", "M", 3, amount=usd(4000)),
                  tx("o2", "M", "C", 4, amount=usd(6000)))
    t = g.trail("alert")
    assert (received(t, "B"), received(t, "C")) == (50_000, 50_000)
    assert row(t, "M", "receiver").sent_cents == 100_000
    # the subject's own pool was empty: the whole alerted amount is older money
    assert row(t, "A", "subject").held_cents == 100_000


def test_money_the_window_did_not_see_is_not_traced() -> None:
    # M sends 800 having received only the alerted 500: 500 traced, 300 from before the window
    g = Graph(tx("alert", "A", "M", 1, amount=usd(500)), tx("o1", "M", "B", 2, amount=usd(800)))
    t = g.trail("alert")
    assert received(t, "B") == 50_000


def test_upstream_a_merge_is_attributed_by_what_each_payer_still_made_up() -> None:
    # S: 600 from P; sends 300 to Z (half of P's money left); 400 from Q; the pool is P 300, Q 400;
    # the alerted 500 takes 5/7 of each: P 214.2857..., Q 285.7142... (cents half-even)
    g = Graph(tx("p", "P", "S", 0, amount=usd(600)), tx("z", "S", "Z", 1, amount=usd(300)),
                  tx("q", "Q", "S", 2, amount=usd(400)), tx("alert", "S", "R", 3, amount=usd(500)))
    t = g.trail("alert")
    ups = {f.event_id: f.traced_cents for f in t.flows if f.side == "upstream"}
    assert ups == {"p": 21_429, "q": 28_571}
    assert (row(t, "P", "upstream").sent_cents, row(t, "Q", "upstream").sent_cents) == (21_429, 28_571)
    assert row(t, "S", "subject").held_cents == 0
    assert "z" not in {f.event_id for f in t.flows}  # money the subject spent elsewhere


def test_upstream_two_hops_back_and_older_money() -> None:
    # U -> P 600 -> S, Q -> S 400; the alerted 500 is half of S's pool: P 300, Q 200; all of P's
    # 600 came from U, so U made up 300 of it; U's own pool was empty: older money
    g = Graph(tx("u", "U", "P", 0, amount=usd(600)), tx("p", "P", "S", 1, amount=usd(600)),
                  tx("q", "Q", "S", 2, amount=usd(400)), tx("alert", "S", "R", 3, amount=usd(500)))
    t = g.trail("alert")
    assert row(t, "U", "upstream").sent_cents == 30_000
    assert row(t, "U", "upstream").hop == 2 and row(t, "P", "upstream").hop == 1
    assert row(t, "U", "upstream").held_cents == 30_000
    assert row(t, "Q", "upstream").held_cents == 20_000


def test_a_cycle_brings_the_money_back_to_the_subject() -> None:
    # A -> B 1,000 -> C 1,000 -> A 800 -> D 800: C keeps 200; A passes the 800 on to D
    g = Graph(tx("alert", "A", "B", 0, amount=usd(1000)), tx("b", "B", "C", 1, amount=usd(1000)),
                  tx("c", "C", "A", 2, amount=usd(800)), tx("d", "A", "D", 3, amount=usd(800)))
    t = g.trail("alert")
    back = row(t, "A", "downstream")
    assert (back.received_cents, back.sent_cents, back.held_cents) == (80_000, 80_000, 0)
    assert row(t, "C", "downstream").held_cents == 20_000
    assert received(t, "D") == 80_000
    assert row(t, "D", "downstream").hop == 4


def test_within_a_minute_money_in_comes_before_money_out() -> None:
    # the pass-on has the smaller event id, in the same minute as the alerted transfer
    g = Graph(tx("z-alert", "A", "M", 5, amount=usd(1000)), tx("a-out", "M", "B", 5, amount=usd(1000)))
    t = g.trail("z-alert")
    assert received(t, "B") == 100_000


def test_flow_order_breaks_a_cycle_inside_a_minute_at_its_smallest_id() -> None:
    es = [GraphEdge.from_event(e) for e in (tx("b", "Y", "X", 0), tx("a", "X", "Y", 0), tx("c", "W", "X", 0))]
    # c feeds X, and must come before X's a; a and b form a cycle: a (smaller) first after c
    assert [e.event_id for e in flow_order(es)] == ["c", "a", "b"]


def test_small_flows_are_counted_not_followed() -> None:
    g = Graph(tx("alert", "A", "M", 1, amount=usd(1000)), tx("big", "M", "B", 2, amount=usd(995)),
                  tx("card", "M", "C", 3, amount=usd(5)), tx("onward", "C", "D", 4, amount=usd(5)))
    t = g.trail("alert")
    assert acct("C") not in {a.node_id for a in t.accounts}
    assert {(s, w): (n, c) for s, w, n, c in t.dropped}[("downstream", "small")] == (1, 500)
    assert received(t, "B") == 99_500


def test_a_hub_is_shown_not_followed() -> None:
    busy = [tx(f"h{i}", "M", f"K{i}", 10 + i, amount=usd(10)) for i in range(5)]
    g = Graph(tx("alert", "A", "M", 1, amount=usd(1000)), *busy)
    t = g.trail("alert", hub_degree=3)
    m = row(t, "M", "receiver")
    assert m.hub and m.received_cents == 100_000 and m.sent_cents == 0
    assert {a.node_id for a in t.accounts} == {acct("A"), acct("M")}


def test_the_hop_limit_cuts_and_says_where() -> None:
    g = Graph(tx("alert", "A", "B", 0, amount=usd(100)), tx("c", "B", "C", 1, amount=usd(100)),
                  tx("d", "C", "D", 2, amount=usd(100)))
    t = g.trail("alert", max_hops=2)
    assert acct("D") not in {a.node_id for a in t.accounts}
    assert [(c.reason, c.node_id, c.dropped) for c in t.cuts] == [("hop limit", acct("C"), 1)]
    assert {(s, w): (n, c) for s, w, n, c in t.dropped}[("downstream", "limit")] == (1, 10_000)
    assert t.truncated


def test_the_window_is_the_horizon_each_way() -> None:
    g = Graph(tx("alert", "A", "M", 0, amount=usd(100)), tx("late", "M", "B", 60 * 25, amount=usd(100)))
    assert acct("B") not in {a.node_id for a in g.trail("alert", horizon=timedelta(days=1)).accounts}
    assert received(g.trail("alert", horizon=timedelta(days=2)), "B") == 10_000


def test_the_headline_makes_room_for_the_typology_members() -> None:
    outs = [tx(f"o{i}", "M", f"B{i}", 2 + i, amount=usd(100)) for i in range(10)]
    g = Graph(tx("alert", "A", "M", 1, amount=usd(1000)), *outs)
    keep = [acct("P1"), acct("P2")]
    t = g.trail("alert", headline=6, keep=keep)
    shown = [a.node_id for a in t.accounts if a.headline]
    # subject, receiver, two places kept for the members (not on the trail), two of the payees
    assert shown[:2] == [acct("A"), acct("M")] and len(shown) == 4
    assert set(shown[2:]) <= {acct(f"B{i}") for i in range(10)}


def test_the_record_round_trips_and_its_id_depends_on_the_flows() -> None:
    g = Graph(tx("alert", "A", "M", 1, amount=usd(1000)), tx("o1", "M", "B", 2, amount=usd(600)))
    t = g.trail("alert")
    assert MoneyTrail.from_json(t.to_json()) == t
    g.store.add_transactions([tx("o2", "M", "C", 3, amount=usd(400))])
    assert g.trail("alert").trail_id != t.trail_id


def test_every_backend_gives_the_same_trail(store) -> None:
    events = [tx("clean", "X", "M", 0, amount=usd(3000)), tx("alert", "A", "M", 1, amount=usd(1000)),
              tx("o1", "M", "B", 2, amount=usd(2000)), tx("p", "P", "A", 0, amount=usd(700)),
              tx("o2", "B", "C", 3, amount=usd(1500))]
    store.add_transactions(events)
    store.flush()
    mem = Graph(*events).store
    alert = GraphEdge.from_event(events[1])
    a, b = money_trail(store, alert), money_trail(mem, alert)
    assert a.to_dict() | {"backend": ""} == b.to_dict() | {"backend": ""}
    assert received(a, "C") == 50_000 * 1500 // 2000


# ------------------------------------------------------------------ a brute force on random graphs


def _brute_force(edges: list[GraphEdge], root: str):
    """Every pool holds, per transfer, how much of its money crossed that transfer; each transfer
    out takes the same share of each (its carried part: at most the pool). Returns, per transfer,
    the cents of the alerted money it carried (downstream) and the cents of the alerted transfer
    that crossed it before (upstream)."""
    balance: dict[str, Fraction] = defaultdict(Fraction)
    crossed: dict[str, dict[str, Fraction]] = defaultdict(dict)  # account -> edge -> amount
    carried_by: dict[str, dict[str, Fraction]] = {}
    for e in flow_order(edges):
        p = balance[e.src]
        c = min(Fraction(e.paid_cents), p)
        vec = {f: v * c / p for f, v in crossed[e.src].items()} if p else {}
        if p:
            for f in crossed[e.src]:
                crossed[e.src][f] -= vec[f]
            balance[e.src] -= c
        vec[e.event_id] = Fraction(e.paid_cents)
        carried_by[e.event_id] = vec
        balance[e.dst] += e.received_cents
        for f, v in vec.items():
            crossed[e.dst][f] = crossed[e.dst].get(f, Fraction(0)) + v
    down = {eid: v.get(root, Fraction(0)) for eid, v in carried_by.items()}
    up = dict(carried_by[root])
    return down, up


@st.composite
def random_flows(draw):
    names = [f"N{i}" for i in range(draw(st.integers(3, 7)))]
    n = draw(st.integers(2, 16))
    events = []
    for i in range(n):
        a = draw(st.sampled_from(names))
        b = draw(st.sampled_from([x for x in names if x != a]))
        events.append(tx(f"e{i:02d}", a, b, draw(st.integers(0, 12)), amount=usd(draw(st.integers(1, 50)) * 10)))
    return events, draw(st.integers(0, n - 1))


@settings(max_examples=60, deadline=None)
@given(random_flows())
def test_the_trail_agrees_with_a_brute_force_that_tracks_every_crossing(case) -> None:
    events, k = case
    g = Graph(*events)
    edges = [GraphEdge.from_event(e) for e in events]
    root = edges[k]
    t = money_trail(g.store, root, min_share="1/1000000000", max_hops=64, budget=UNBOUNDED)
    down, up = _brute_force(edges, root.event_id)

    def cents(x: Fraction) -> int:
        return round(x)  # half-even, as the trail rounds

    want = {(eid, "downstream"): cents(v) for eid, v in down.items() if v and eid != root.event_id}
    want |= {(eid, "upstream"): cents(v) for eid, v in up.items() if v and eid != root.event_id}
    got = {(f.event_id, f.side): f.traced_cents for f in t.flows if f.side != "alerted"}
    assert {key: v for key, v in got.items() if v} == {key: v for key, v in want.items() if v}


def test_the_downstream_trace_is_the_alerted_money_only() -> None:
    # A -> M 1,000 (alerted); M -> B 600 and M -> C 400, C -> D 400; M -> tiny 5 is under the share;
    # A's other transfer A -> X is not the alerted money
    g = Graph(tx("alert", "A", "M", 1, amount=usd(1000)), tx("x", "A", "X", 0, amount=usd(50)),
              tx("o1", "M", "B", 2, amount=usd(600)), tx("o2", "M", "C", 3, amount=usd(395)),
              tx("tiny", "M", "T", 4, amount=usd(5)), tx("o3", "C", "D", 5, amount=usd(395)))
    tr = g.trail("alert").downstream_trace()
    assert tr.root == acct("A") and tr.direction == "out"
    assert [(n.node_id, n.hop_depth, n.upstream_ids) for n in tr.nodes] == [
        (acct("A"), 0, ()), (acct("M"), 1, (acct("A"),)), (acct("B"), 2, (acct("M"),)),
        (acct("C"), 2, (acct("M"),)), (acct("D"), 3, (acct("C"),))]
    assert [(e.event_id, e.hop) for e in tr.edges] == [("alert", 1), ("o1", 2), ("o2", 2), ("o3", 3)]
    assert tr.max_hops == 5
