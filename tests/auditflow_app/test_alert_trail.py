"""The deep path's money trail (:func:`auditflow_app.flow.alert_trail`): a fan-in alert's evidence
holds its fan-in's members, and follows the alerted share of the mule's pool onward."""

from __future__ import annotations

from auditflow.money import Money
from auditflow.records import Alert, alert_id_for
from auditflow_app import flow
from auditflow_app.settings import Settings
from evidence_graph import NetworkxGraphStore
from evidence_graph.testing import acct, tx


def test_a_fan_in_alert_carries_its_members_and_its_share_of_the_mule_s_pool() -> None:
    # six payers pay the mule M within an hour; M then sends 50,000 on to Z
    amounts = [9_000 + 37 * i for i in range(6)]
    events = [tx(f"in{i}", f"P{i}", "M", 10 * i, amount=Money("US Dollar", a * 100)) for i, a in enumerate(amounts)]
    events.append(tx("out", "M", "Z", 120, amount=Money("US Dollar", 50_000 * 100)))
    store = NetworkxGraphStore()
    store.add_transactions(events)
    ev = events[2]
    alert = Alert(alert_id_for(ev.event_id), ev, 0.9, 0.5, "model", ())
    settings = Settings()
    _, matches = flow.trace_and_typologies(store, alert, settings)
    trail = flow.alert_trail(store, alert, settings, matches)
    members = {acct(f"P{i}") for i in range(6)} | {acct("M")}
    assert [m.typology for m in matches] == ["fan-in"] and set(trail.members) == members
    # M's pool held all six payments (54,555) when it sent 50,000: the alerted 9,074 rides pro rata
    z = trail.account(acct("Z"))
    assert z.received_cents == round(9_074 * 100 * 50_000 / sum(amounts))
    assert z.headline and trail.account(acct("M")).headline
