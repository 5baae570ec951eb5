"""The deep path's money trail (:func:`auditflow_app.flow.alert_trail`): a fan-in alert's evidence
holds its fan-in's members, and follows the alerted share of the mule's pool onward."""

from __future__ import annotations

from auditflow.money import Money
from auditflow.records import Alert, alert_id_for
from auditflow_app import flow
from auditflow_app.settings import Settings
from evidence_graph import NetworkxGraphStore
from evidence_graph.testing import acct, tx


#: Six payers pay the mule M within an hour (USD 9,000 + 37 i each); M then sends 50,000 on to Z.
AMOUNTS = [9_000 + 37 * i for i in range(6)]


def _fan_in_alert():
    """The fan-in's events, a store holding them, the alert on P2's payment, the default settings
    and the typologies matched around it."""
    events = [tx(f"in{i}", f"P{i}", "M", 10 * i, amount=Money("US Dollar", a * 100)) for i, a in enumerate(AMOUNTS)]
    events.append(tx("out", "M", "Z", 120, amount=Money("US Dollar", 50_000 * 100)))
    store = NetworkxGraphStore()
    store.add_transactions(events)
    alert = Alert(alert_id_for("in2"), events[2], 0.9, 0.5, "model", ())
    settings = Settings()
    _, matches = flow.trace_and_typologies(store, alert, settings)
    return events, store, alert, settings, matches


def test_a_fan_in_alert_carries_its_members_and_its_share_of_the_mule_s_pool() -> None:
    _, store, alert, settings, matches = _fan_in_alert()
    trail = flow.alert_trail(store, alert, settings, matches)
    members = {acct(f"P{i}") for i in range(6)} | {acct("M")}
    assert [m.typology for m in matches] == ["fan-in"] and set(trail.members) == members
    # M's pool held all six payments (54,555) when it sent 50,000: the alerted 9,074 rides pro rata
    z = trail.account(acct("Z"))
    assert z.received_cents == round(9_074 * 100 * 50_000 / sum(AMOUNTS))
    assert z.headline and trail.account(acct("M")).headline


def test_the_sar_facts_of_a_fan_in_alert() -> None:
    events, store, alert, settings, matches = _fan_in_alert()
    sar = flow.sar_context(store, alert, settings, matches)
    # the alerted payment and the five others of its fan-in: 54,555 USD from minute 0 to minute 50
    assert (sar.suspicious_transfers, sar.suspicious_cents) == (6, 5_455_500)
    assert (sar.first, sar.last) == (events[0].timestamp, events[5].timestamp)
    # the subject P2 made one transfer in the window, the alerted one
    a = sar.subject
    assert (a.transfers_in, a.transfers_out, a.usd_in_cents, a.usd_out_cents) == (0, 1, 0, 907_400)
    assert a.first_seen == a.last_seen == events[2].timestamp


def test_prior_alerts_are_the_earlier_ones_on_either_account() -> None:
    def alert(eid: str, src: str, dst: str, minute: int) -> Alert:
        return Alert(alert_id_for(eid), tx(eid, src, dst, minute), 0.7, 0.5, "model", ())

    now = alert("now", "A", "B", 100)
    run = [alert("a", "A", "X", 10), alert("b", "Y", "B", 20), alert("c", "X", "Y", 30), alert("d", "B", "A", 200),
           now, alert("e", "Z", "A", 50)]
    got = flow.prior_alerts(flow.alerts_by_account(run), now)
    # latest first; "c" shares no account, "d" is later, "now" is itself
    assert [(p.alert_id, p.account) for p in got] == [
        ("alert-e", acct("A")), ("alert-b", acct("B")), ("alert-a", acct("A"))]
