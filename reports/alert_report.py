"""One PDF audit report per alert, with a signed manifest of what it was made from.

The report reads top to bottom as an investigator works: the case header (audit chain id,
alert id, event time, model version, run id), an executive summary, the narrative (the
narrator's when there is one, else a template, and the report says which), the reason codes
with their SHAP chart, the evidence subgraph and hop table, the typologies found, the segment's
drift status at alert time (when drift figures are given), the data lineage (input file and
offset, graph query and its parameters, model digest, code version) and the compliance section
of the chosen profile (:mod:`reports.profile`: ``sar``, ``gdpr-art22``, ``ccpa``, as data). The
complete trace is written beside the PDF, gzip-compressed (``<stem>.trace.json.gz``).

:func:`render_alert_report` is deterministic: the same case gives a byte-identical PDF
(:mod:`reports._pdf`: invariant mode, embedded fonts, fixed dates, no clock). Money is printed
with :func:`auditflow.money.format_amount` exactly as it arrived, floats with ``repr`` (the
shortest text that reads back to the same value).

File names come from the alert id through :func:`report_file_stem` only (:mod:`reports.names`).
The full id stays inside the report and its manifest. :class:`ReportWriter` writes the reports
of a run: one that fails is recorded as a :class:`ReportFailure` (alert id and reason) and the
others are still written.

>>> report_file_stem("alert-tx-4b1d0c9e7f2a3b65")
'alert-tx-4b1d0c9e7f2a3b65'
>>> report_file_stem("alert-01/0X")
'alert-01_0X~55d1233b25c6c73c'
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from xml.sax.saxutils import escape

import reportlab
from reportlab.lib.units import mm
from reportlab.platypus import CondPageBreak, KeepTogether, Paragraph, Spacer

from auditflow.canonical import canonical_sha256
from auditflow.fincen import activity_categories
from auditflow.money import CURRENCIES, Money, format_amount, usd_cents
from auditflow.reasons import TEMPLATES, about_others, is_absence, reason_text
from auditflow.records import (
    AccountActivity,
    Alert,
    EvidenceTrace,
    MoneyTrail,
    Narrative,
    PriorAlert,
    ReasonCode,
    ReportManifest,
)
from reports._charts import shap_bar_chart
from reports._pdf import (
    CONTENT_W,
    PDF_CREATION_DATE,
    SHORT_DIGEST,
    STYLES,
    _grid_table,
    _key_value_table,
    _p,
    build_pdf,
)
from reports.manifest import SIGNATURE_ALGORITHM
from reports.names import MAX_FILE_STEM, report_file_stem  # noqa: F401 - re-exported
from reports.plain import (
    amount_text,
    count_text,
    duration_text,
    money_plain,
    round_figures,
    score_text,
    share_text,
)
from reports.profile import Profile, ProfileError, load_profile, render_sections
from reports.signing import Signer

DEFAULT_PROFILE = "sar"


@dataclass(frozen=True)
class DriftStatus:
    """One drift figure of the alert's segment at alert time: what was measured, its value and
    the status it gives (``ok``, ``warning``, ``drift``)."""

    measure: str
    value: str
    status: str


@dataclass(frozen=True)
class SarContext:
    """What a suspicious activity report needs beyond the alert: the subject's activity in the
    evidence window, the suspicious transfers (the alerted one and those of the typology instance
    it belongs to: how many, their total in US cents, first and last), and the run's earlier
    alerts on the same accounts."""

    subject: AccountActivity
    suspicious_transfers: int
    suspicious_cents: int
    first: datetime
    last: datetime
    prior_alerts: tuple[PriorAlert, ...] = ()

    def to_dict(self) -> dict:
        return {"subject": self.subject.to_dict(), "suspicious": [self.suspicious_transfers, self.suspicious_cents],
                "range": [_ts(self.first), _ts(self.last)], "prior_alerts": [p.to_dict() for p in self.prior_alerts]}


@dataclass(frozen=True)
class ReportCase:
    """Everything an alert report shows (its content address is :func:`report_id_for`)."""

    alert: Alert
    trace: EvidenceTrace
    reason_codes: tuple[ReasonCode, ...]
    input_sha256: str
    code_version: str
    seed: int
    typologies: tuple[tuple[str, str], ...] = ()
    narrative: str | Narrative | None = None  # the narrator's; None: the report uses its template
    drift: tuple[DriftStatus, ...] | None = None  # None: no drift figures exist for the segment
    profile: str = DEFAULT_PROFILE
    institution: str | None = None  # who files / controls the processing (compliance profiles)
    contact: str | None = None  # where a subject asks for review / exercises rights
    trail: MoneyTrail | None = None  # the alerted money's trail (evidence_graph.trail)
    sar: SarContext | None = None  # the SAR's subject block, suspicious total and prior alerts

    @property
    def run_id(self) -> str:
        """The run that made the alert: a content address of its input, model, code and seed."""
        return "run-" + canonical_sha256({"input_sha256": self.input_sha256, "model_digest": self.alert.model_digest,
                                          "code_version": self.code_version, "seed": self.seed})[:16]

    @property
    def audit_chain_id(self) -> str:
        """The chain input record -> alert -> evidence trace -> report, as one content address."""
        ev = self.alert.event
        return "chain-" + canonical_sha256({"input_sha256": self.input_sha256, "source_offset": ev.source_offset,
                                            "event_id": ev.event_id, "alert_id": self.alert.alert_id,
                                            "trace_id": self.trace.trace_id,
                                            "model_digest": self.alert.model_digest})[:16]


# ----------------------------------------------------------------------------- text helpers


def money_text(m: Money) -> str:
    """``0.025852 Bitcoin (XBT)``: the exact amount, then the currency name and code."""
    return f"{format_amount(m)} {m.currency} ({CURRENCIES[m.currency][0]})"


def number_text(x: float) -> str:
    """``repr`` of the float: the shortest text that reads back to exactly this value."""
    return repr(float(x))


def _ts(dt) -> str:
    return dt.strftime("%Y-%m-%d %H:%M")


def _cut_reasons(trace: EvidenceTrace) -> str:
    """Why a truncated trace was cut, as its cuts say (first seen first): fan-out cap, amount,
    hub, node/edge/time budget; a trace recorded before cuts were kept says it was cut, no more."""
    reasons = list(dict.fromkeys(c.reason for c in trace.cuts))
    return ", ".join(reasons) if reasons else "reason not recorded"


def _short(digest: str) -> str:
    return digest if len(digest) <= SHORT_DIGEST else digest[:SHORT_DIGEST] + "..."


def report_id_for(case: ReportCase) -> str:
    """A content address of everything the report shows: same case, same report id."""
    payload = {
        "alert": case.alert.to_dict(),
        "trace": case.trace.to_dict(),
        "reason_codes": [rc.to_dict() for rc in case.reason_codes],
        "input_sha256": case.input_sha256,
        "code_version": case.code_version,
        "seed": case.seed,
        "typologies": [[n, e] for n, e in case.typologies],
        "narrative": case.narrative.content() if isinstance(case.narrative, Narrative) else case.narrative,
        "drift": None if case.drift is None else [[d.measure, d.value, d.status] for d in case.drift],
        "profile": case.profile,
        "institution": case.institution,
        "contact": case.contact,
    }
    if case.trail is not None:
        payload["trail"] = case.trail.to_dict()
    if case.sar is not None:
        payload["sar"] = case.sar.to_dict()
    return "report-" + canonical_sha256(payload)[:16]


def _party(ref) -> str:
    return f"bank {ref.bank} / account {ref.account} ({ref.node_id})"


def plain_reasons(reason_codes: Sequence[ReasonCode], n: int = 3, *, subject_only: bool = False) -> list[str]:
    """The ``n`` factors that raised the score most, as a person reads them: the sentence of the
    versioned mapping (:mod:`auditflow.reasons`) for the value, figures rounded; never a factor
    that lowered the score, a yes/no factor that is off ("not paid by Cheque") or a raw feature
    name (a feature outside the mapping shows its recorded description); ``subject_only``: none
    about the receiver's activity either."""
    out: list[str] = []
    for rc in reason_codes:
        if rc.contribution <= 0 or is_absence(rc.feature, rc.value) or (subject_only and about_others(rc.feature)):
            continue
        out.append(round_figures(reason_text(rc.feature, rc.value) if rc.feature in TEMPLATES else rc.description))
        if len(out) == n:
            break
    return out


def _amount_plain(m: Money) -> str:
    """``XBT 0.02585 (about USD 297.3)``: rounded, in its currency, with the US dollar value."""
    text = money_plain(m)
    return text if m.currency == "US Dollar" else f"{text} (about {amount_text(usd_cents(m))})"


def _verdict(a: Alert) -> str:
    side = "at or above" if a.score >= a.threshold else "below"
    return f"The model scored the transfer {score_text(a.score)}, {side} the alert threshold of {score_text(a.threshold)}"


def _subject_only(case: ReportCase) -> bool:
    return load_profile(case.profile).subject_only


def case_fields(case: ReportCase) -> dict[str, str | None]:
    """The facts a profile template may use, from the case (``None`` where the case has none),
    in rounded figures (the appendix has the exact ones)."""
    a, ev, t = case.alert, case.alert.event, case.trace
    amount = _amount_plain(ev.amount_paid)
    if ev.amount_received != ev.amount_paid:
        amount += f" paid, {_amount_plain(ev.amount_received)} received"
    typ = ", ".join(n for n, _ in case.typologies)
    reasons = plain_reasons(case.reason_codes, subject_only=_subject_only(case))
    why = _verdict(a)
    why += f"; what raised it most: {'; '.join(reasons)}" if reasons else "; no single factor raised it much"
    why += f". Laundering typologies matched by the evidence: {typ}." if typ else ". No known laundering typology matched."
    if case.trail is not None:
        how = " ".join(trail_summary(case.trail)[1:])
    else:
        how = (f"Following the money out of {t.root} for up to {t.max_hops} hops reached "
               f"{count_text(len(t.nodes), 'account')} through {count_text(len(t.edges), 'transfer')}.")
    return {
        "alert_id": a.alert_id,
        "event_id": ev.event_id,
        "subject": _party(ev.sender),
        "counterparty": _party(ev.receiver),
        "amount": amount,
        "payment_format": ev.payment_format,
        "when": _ts(ev.timestamp),
        "where": f"from bank {ev.sender.bank} to bank {ev.receiver.bank}",
        "source": "the input file and record named under Data lineage (appendix)",
        "why": why,
        "how": how,
        "logic": ("A computer model gives every payment a score between 0 and 1 from facts about it: its amount "
                  "and type, how the paying and receiving accounts were used in the hour, day and week before, and "
                  "how money moved between accounts around it. A payment that scores at or above a set level "
                  f"(here {score_text(a.threshold)}) is passed to an investigator, a person, who decides what "
                  "happens next; the score alone decides nothing. The factors named are the facts about this "
                  "payment that raised its score the most (each factor's share is measured exactly and kept "
                  f"on file). Model version {_short(a.model_digest)}."),
        "controller": case.institution,
        "business": case.institution,
        "contact": case.contact,
        **_sar_fields(case),
    }


def _sar_fields(case: ReportCase) -> dict[str, str]:
    """The SAR's subject block, suspicious total and date range, FinCEN activity categories and
    the run's prior alerts on the same accounts, in rounded figures."""
    ev, sar = case.alert.event, case.sar
    cats = activity_categories([n for n, _ in case.typologies], ev.payment_format,
                               cross_currency=ev.amount_paid.currency != ev.amount_received.currency)
    fields = {"activity_category": "; ".join(f"{c.text} (code {c.code})" for c in cats)
              + ". Suggested from the evidence: the filer decides."}
    if sar is None:
        return fields | {
            "subject_block": f"{_party(ev.sender)}: its activity was not computed for this report.",
            "suspicious_amount": f"{_amount_plain(ev.amount_paid)} in the alerted transfer",
            "date_range": f"{_ts(ev.timestamp)} (the alerted transfer)",
            "prior_alerts": "not looked up for this report",
        }
    a = sar.subject
    span = duration_text((a.window_end - a.window_start) / 2)
    seen = (f"first seen {_ts(a.first_seen)}, last seen {_ts(a.last_seen)}" if a.first_seen and a.last_seen
            else "no transfers")
    block = (f"{_party(ev.sender)}. In the {span} before and after the alert ({_ts(a.window_start)} to "
             f"{_ts(a.window_end)}): {seen}; received {amount_text(a.usd_in_cents)} in "
             f"{count_text(a.transfers_in, 'transfer')} and sent {amount_text(a.usd_out_cents)} in "
             f"{count_text(a.transfers_out, 'transfer')}" + (" (more transfers than counted)." if a.capped else "."))
    if sar.prior_alerts:
        shown = ", ".join(f"{p.alert_id} on {_ts(p.timestamp)} ({p.account}, score {score_text(p.score)})"
                          for p in sar.prior_alerts[:5])
        more = f" and {len(sar.prior_alerts) - 5} more" if len(sar.prior_alerts) > 5 else ""
        prior = f"{count_text(len(sar.prior_alerts), 'earlier alert')} in this run on the same accounts: {shown}{more}."
    else:
        prior = "none: no earlier alert in this run on the subject's or the receiver's account."
    return fields | {
        "subject_block": block,
        "suspicious_amount": (f"{amount_text(sar.suspicious_cents)} in {count_text(sar.suspicious_transfers, 'transfer')}"
                              " (the alerted transfer and the typology instance it belongs to)"),
        "date_range": f"{_ts(sar.first)} to {_ts(sar.last)}",
        "prior_alerts": prior,
    }


#: The case fields a profile may require that come from who writes the reports, not the case.
ORGANISATION_FIELDS = {"controller": "institution", "business": "institution", "contact": "contact"}


def check_organisation(profile: Profile, institution: str | None, contact: str | None) -> None:
    """:class:`~reports.profile.ProfileError` when the profile requires an institution or contact
    that is not configured (the one thing a case cannot supply itself)."""
    given = {"institution": institution, "contact": contact}
    missing = [f for f in profile.required if f in ORGANISATION_FIELDS and not given[ORGANISATION_FIELDS[f]]]
    if missing:
        raise ProfileError(f"profile {profile.name!r} requires {missing}, which this report does not have "
                           "(the institution and contact its reports name)")


# ----------------------------------------------------------------------------- sections


def _case_header(case: ReportCase, profile: Profile) -> list:
    ev = case.alert.event
    rows = [
        ("Audit chain id", case.audit_chain_id, "cell_mono"),
        ("Alert id", case.alert.alert_id, "cell_mono"),
        ("Event time", f"{_ts(ev.timestamp)} (UTC)", "cell"),
        ("Model version", case.alert.model_digest, "cell_mono"),
        ("Run id", case.run_id, "cell_mono"),
        ("Compliance profile", f"{profile.name}: {profile.title}", "cell"),
    ]
    return [Paragraph("Case", STYLES["h2"]), _key_value_table(rows)]


def plain_summary(case: ReportCase) -> list[str]:
    """The first page in plain words: who paid whom, how much, when, why it was flagged, the
    pattern it is part of, and where the money came from and went (the money trail)."""
    a, ev = case.alert, case.alert.event
    only = _subject_only(case)
    to = "another account" if only else f"account {ev.receiver.node_id} (bank {ev.receiver.bank})"
    lines = [f"On {ev.timestamp:%Y-%m-%d} at {ev.timestamp:%H:%M} UTC, account {ev.sender.node_id} (bank "
             f"{ev.sender.bank}) paid {_amount_plain(ev.amount_paid)} by {ev.payment_format} to {to}."]
    reasons = plain_reasons(case.reason_codes, subject_only=only)
    lines.append(f"{_verdict(a)}." + (f" What raised it most: {'; '.join(reasons)}." if reasons else ""))
    if only:  # a notice to the data subject: nothing about other accounts
        return lines + ["Only this account's own data is shown here; what the review found about other "
                        "accounts is kept by the institution."]
    for name, explanation in case.typologies:
        lines.append(f"Pattern: {name}. {round_figures(explanation)}")
    if not case.typologies:
        lines.append("Pattern: no known laundering typology matched around this transfer.")
    if case.trail is not None:
        lines += trail_summary(case.trail)[1:]
    else:
        t = case.trace
        lines.append(f"Evidence: following the money out of {t.root} reached {count_text(len(t.nodes), 'account')} "
                     f"through {count_text(len(t.edges), 'transfer')} within {t.max_hops} hops"
                     + (f" (cut: {_cut_reasons(t)})." if t.truncated else "."))
    return lines


def _plain_summary_section(case: ReportCase) -> list:
    out: list = [Paragraph("Summary", STYLES["h2"])]
    for line in plain_summary(case):
        out += [_p(line, "body"), Spacer(1, 2)]
    return out


#: The lines that open and close the narrator's paragraph in the PDF (see :func:`narrative_from_pdf_text`).
NARRATOR_NOTE = "Source: the narrator. Every fact below was checked against the evidence while it was written."
NARRATOR_END = "Sentence sources:"


def narrative_from_pdf_text(text: str) -> str | None:
    """The narrator's paragraph in a report's extracted text (lines joined by spaces), or None."""
    start = text.find(NARRATOR_NOTE)
    end = text.find(NARRATOR_END, start)
    if start < 0 or end < 0:
        return None
    return " ".join(text[start + len(NARRATOR_NOTE):end].split())


def _narrator_section(n: Narrative) -> list:
    """The narrator's paragraph, which sentences came from the template, and the evidence each
    sentence states."""
    model = dict(n.decoding)
    out: list = [Paragraph("Narrative", STYLES["h2"]), _p(NARRATOR_NOTE, "note"), Spacer(1, 2),
                 Paragraph(escape(n.text), STYLES["body"]), Spacer(1, 3)]
    templates = n.template_sentences
    sources = (f"{NARRATOR_END} sentence{'s' if len(templates) > 1 else ''} "
               f"{', '.join(map(str, templates))} came from the template (the model's attempts were rejected "
               "by the fact check); the others were written by the model." if templates else
               f"{NARRATOR_END} every sentence was written by the model; none came from the template.")
    out.append(_p(sources, "note"))
    out.append(_p(f"Model {n.model_digest}, {n.mode} decoding (temperature {model.get('temperature')}, top-k "
                  f"{model.get('top_k')}, retry budget {model.get('retry_budget')}), seed {n.seed}.", "note"))
    rows = [[_p(str(i)), _p(s.source), _p(", ".join(s.evidence), "cell_mono")]
            for i, s in enumerate(n.sentences, 1)]
    out.append(_grid_table(["#", "Source", "Evidence the sentence states"], rows,
                           [10 * mm, 22 * mm, CONTENT_W - 32 * mm]))
    return out


def _narrative_from(case: ReportCase) -> list:
    if isinstance(case.narrative, Narrative):
        return _narrator_section(case.narrative)
    out: list = [Paragraph("Narrative", STYLES["h2"])]
    if case.narrative is not None:
        out.append(_p("Source: the narrator (generated text; check it against the evidence below).", "note"))
        text = case.narrative
    else:
        out.append(_p("Source: template (no narrator output for this alert): the case's recorded facts are the "
                      "summary on the first page.", "note"))
        return out
    out.append(Spacer(1, 2))
    for para in text.strip().split("\n\n"):
        out.append(Paragraph(escape(para.strip()).replace("\n", "<br/>"), STYLES["body"]))
        out.append(Spacer(1, 3))
    return out


def _drift_section(drift: Sequence[DriftStatus] | None) -> list:
    if drift is None:
        return []
    out: list = [Paragraph("Drift at alert time", STYLES["h2"])]
    if not drift:
        out.append(_p("No drift figures were recorded for this alert's segment.", "body"))
        return out
    rows = [[_p(d.measure), _p(d.value), _p(d.status, "warn" if d.status != "ok" else "cell")] for d in drift]
    out.append(_grid_table(["Measure (feature, segment, window)", "Value", "Status"], rows,
                           [CONTENT_W - 60 * mm, 30 * mm, 30 * mm]))
    return out


def graph_query_text(t: EvidenceTrace) -> str:
    """The graph query that made the trace, with its parameters (shown and signed in the manifest)."""
    window = (f"[{_ts(t.window_start) if t.window_start else 'unbounded'}, "
              f"{_ts(t.window_end) if t.window_end else 'unbounded'})")
    return (f"trace_evidence(root={t.root}, direction={t.direction}, max_hops={t.max_hops}, "
            f"fanout_cap={t.fanout_cap}, window={window}) on {t.backend or 'an unrecorded backend'}")


def _lineage_section(case: ReportCase) -> list:
    ev, t = case.alert.event, case.trace
    rows = [
        ("Input file SHA-256", case.input_sha256, "cell_mono"),
        ("Input record", f"offset {ev.source_offset} (event {ev.event_id})", "cell"),
        ("Graph query", graph_query_text(t), "cell_mono"),
        ("Trace id", t.trace_id, "cell_mono"),
        ("Model digest", case.alert.model_digest, "cell_mono"),
        ("Code version", case.code_version, "cell_mono"),
        ("Seed", str(case.seed), "cell_mono"),
    ]
    return [KeepTogether([Paragraph("Data lineage", STYLES["h2"]), _key_value_table(rows)])]


def _compliance_section(case: ReportCase, profile: Profile) -> list:
    out: list = [Paragraph(escape(f"Compliance: {profile.title}"), STYLES["h2"]),
                 _p(profile.basis, "note"), Spacer(1, 3)]
    for heading, text in render_sections(profile, case_fields(case)):
        out.append(_p(heading, "caption"))
        out.append(_p(text, "body"))
        out.append(Spacer(1, 3))
    out.append(_p(profile.note, "note"))
    return out


def _summary_section(alert: Alert, *, subject_only: bool = False) -> list:
    ev = alert.event
    verdict = "at or above" if alert.score >= alert.threshold else "BELOW"
    rows = [
        ("Alert id", alert.alert_id, "cell_mono"),
        ("Event id", ev.event_id, "cell_mono"),
        ("Time", _ts(ev.timestamp), "cell"),
        ("Sender", f"bank {ev.sender.bank} / account {ev.sender.account} ({ev.sender.node_id})", "cell"),
        ("Receiver", f"bank {ev.receiver.bank} / account {ev.receiver.account} "
                     f"({ev.receiver.node_id})", "cell"),
        ("Amount paid", money_text(ev.amount_paid), "cell"),
        ("Amount received", money_text(ev.amount_received), "cell"),
        ("Payment format", ev.payment_format, "cell"),
        ("Score / threshold", f"{number_text(alert.score)} / {number_text(alert.threshold)} "
                              f"(score {verdict} threshold)", "cell"),
        ("Model digest", f"{_short(alert.model_digest)} (full digest in the manifest section)", "cell"),
        ("Source offset", str(ev.source_offset), "cell"),
    ]
    if subject_only:
        rows = [r for r in rows if r[0] != "Receiver"]
    return [Paragraph("Alert summary", STYLES["h2"]), _key_value_table(rows)]


def _reason_section(reason_codes: Sequence[ReasonCode]) -> list:
    out: list = [Paragraph("Reason codes", STYLES["h2"])]
    if not reason_codes:
        out.append(_p("No reason codes were supplied for this alert.", "body"))
        return out
    rows = [
        [_p(str(i)), _p(rc.feature), _p(rc.description), _p(number_text(rc.value)),
         _p(number_text(rc.contribution))]
        for i, rc in enumerate(reason_codes, start=1)
    ]
    w = [8 * mm, 34 * mm, None, 32 * mm, 34 * mm]
    w[2] = CONTENT_W - sum(x for x in w if x is not None)
    out.append(_grid_table(["#", "Feature", "Description", "Actual value", "SHAP contribution"], rows, w))
    out.append(Spacer(1, 6))
    out.append(KeepTogether([_p("SHAP contributions", "caption"),
                             shap_bar_chart(reason_codes, width=CONTENT_W)]))
    return out


def _typology_section(typologies: Sequence[tuple[str, str]]) -> list:
    out: list = [Paragraph("Typologies found", STYLES["h2"])]
    if not typologies:
        out.append(_p("No known laundering typology matched this alert's evidence.", "body"))
        return out
    rows = [[_p(name), _p(explanation)] for name, explanation in typologies]
    out.append(_grid_table(["Typology", "Explanation"], rows, [45 * mm, CONTENT_W - 45 * mm]))
    return out


def _trace_section(trace: EvidenceTrace) -> list:
    """The complete trace's query, size and cuts; its accounts and transfers are in the trace file."""
    if trace.window_start is None and trace.window_end is None:
        window = "no time window"
    else:
        window = (f"window {_ts(trace.window_start) if trace.window_start else 'unbounded'} to "
                  f"{_ts(trace.window_end) if trace.window_end else 'unbounded'}")
    params = [
        ("Trace id", trace.trace_id, "cell_mono"),
        ("Root account", trace.root, "cell"),
        ("Parameters", f"direction {trace.direction}, max hops {trace.max_hops}, "
                       f"fan-out cap {trace.fanout_cap}, {window}", "cell"),
        ("Backend", trace.backend or "(not recorded)", "cell"),
        ("Size", f"{len(trace.nodes)} accounts, {len(trace.edges)} transfers (every one in the trace file "
                 "listed in the manifest)", "cell"),
    ]
    out: list = [Paragraph("Complete evidence trace", STYLES["h2"]),
                 _p("Every transfer out of the subject's account after the alert and onward, whatever its "
                    "size (the money trail above keeps the alerted money only).", "note"),
                 _key_value_table(params)]
    if trace.truncated:
        out.append(Spacer(1, 3))
        hubs = f" Hubs reached but not expanded: {', '.join(trace.hubs)}." if trace.hubs else ""
        out.append(_p(f"The trace was cut ({_cut_reasons(trace)}): it does not show every transfer "
                      f"of the accounts it reached.{hubs}", "warn"))
    return out


def _trail_unit(trail: MoneyTrail) -> str:
    return "USD" if trail.amount_paid.currency == "US Dollar" else "USD equiv."


def trail_summary(trail: MoneyTrail) -> list[str]:
    """Where the alerted money came from and where it went, in rounded figures (the trail's
    exact cents are in its file)."""
    unit, whole = _trail_unit(trail), trail.amount_cents
    horizon = duration_text((trail.window_end - trail.window_start) / 2)
    rows = {(a.node_id, a.side): a for a in trail.accounts}
    dropped = {(side, why): (n, c) for side, why, n, c in trail.dropped}
    lines = [f"The alerted transfer moved {amount_text(whole, unit)} from {trail.subject} to {trail.receiver}."]
    recv = rows.get((trail.receiver, "receiver"))
    down = [a for a in trail.accounts if a.side == "downstream"]
    if recv is not None and recv.hub:
        lines.append(f"Where it went: {trail.receiver} is a busy account (over the hub limit of transfers in "
                     "the window); the money is not followed past it.")
    elif recv is not None:
        outs = [f for f in trail.flows if f.side == "downstream" and f.src == trail.receiver]
        passed = sum(f.traced_cents for f in outs)
        if passed:
            last = max(f.timestamp for f in outs)
            alert_time = next(f.timestamp for f in trail.flows if f.side == "alerted")
            deepest = max((a.hop for a in down), default=1)
            lines.append(
                f"Where it went: {share_text(passed, whole)} was passed on by {trail.receiver} within "
                f"{duration_text(last - alert_time)} to {count_text(len({f.dst for f in outs}), 'account')}; "
                f"the trail follows it through {count_text(len({a.node_id for a in down}), 'account')}, "
                f"up to {count_text(deepest, 'transfer')} from the subject, within {horizon} of the alert.")
        else:
            lines.append(f"Where it went: {trail.receiver} passed none of it on in transfers of {_percent(trail)} "
                         f"or more within {horizon}.")
        kept = [(a.node_id, a.held_cents) for a in (recv, *down) if a.held_cents and not a.hub]
        hubs = [(a.node_id, a.received_cents) for a in down if a.hub]
        parts = []
        if kept:
            parts.append(f"{share_text(sum(c for _, c in kept), whole)} in "
                         f"{count_text(len({n for n, _ in kept}), 'account')} of the trail")
        if hubs:
            parts.append(f"{share_text(sum(c for _, c in hubs), whole)} at "
                         f"{count_text(len({n for n, _ in hubs}), 'busy account')} not followed")
        n, c = dropped.get(("downstream", "small"), (0, 0))
        if n:
            parts.append(f"{share_text(c, whole)} in {count_text(n, 'smaller transfer')} not followed")
        n, c = dropped.get(("downstream", "limit"), (0, 0))
        if n:
            parts.append(f"{share_text(c, whole)} in {count_text(n, 'transfer')} past the trail's limits")
        if parts:
            lines.append(f"At the end of the window: {'; '.join(parts)}.")
    subj = rows.get((trail.subject, "subject"))
    up = [a for a in trail.accounts if a.side == "upstream"]
    if subj is not None:
        funded = whole - subj.held_cents
        held = f"{share_text(subj.held_cents, whole)} was money {trail.subject} held before the window"
        if up:
            deepest = max(a.hop for a in up)
            lines.append(
                f"Where it came from: {share_text(funded, whole)} of it came from what {trail.subject} received in "
                f"the {horizon} before (the trail follows {count_text(len({a.node_id for a in up}), 'account')} "
                f"that paid it in, up to {count_text(deepest, 'transfer')} back); {held}.")
        else:
            lines.append(f"Where it came from: {held}" + (
                f"; {share_text(funded, whole)} came from transfers into it under {_percent(trail)} each, not "
                "followed." if funded else "."))
    return lines


#: The money-trail table lists the trail's headline accounts (and the typology's members).
_SIDE_WORDS = {"subject": "subject (sent it)", "receiver": "receiver", "upstream": "paid in (before)",
               "downstream": "paid on (after)", "member": "typology member"}


def _trail_section(trail: MoneyTrail) -> list:
    unit = _trail_unit(trail)
    out: list = [Paragraph("Money trail", STYLES["h2"]),
                 _p("Where the alerted money came from and where it went (the summary above says it in words): "
                    "the accounts that carried most of it.", "note"), Spacer(1, 3)]
    shown = [a for a in trail.accounts if a.headline]
    on_trail = {a.node_id for a in trail.accounts}
    s = "cell_small"
    rows = [[_p(_SIDE_WORDS.get(a.side, a.side) + (" (busy: not followed)" if a.hub else ""), s),
             _p(str(a.hop), s), _p(a.node_id, s),
             _p(amount_text(a.received_cents, "") if a.received_cents else "", s),
             _p(amount_text(a.sent_cents, "") if a.sent_cents else "", s),
             _p(amount_text(a.held_cents, "") if a.held_cents else "", s)] for a in shown]
    rows += [[_p(_SIDE_WORDS["member"], s), _p("", s), _p(m, s), _p("", s), _p("", s), _p("", s)]
             for m in trail.members if m not in on_trail]
    w = [34 * mm, 10 * mm, 40 * mm, 0, 0, 0]
    w[3] = w[4] = w[5] = (CONTENT_W - sum(w)) / 3
    out.append(_grid_table(["Role", "Hops", "Account", f"Traced in ({unit})", f"Traced out ({unit})",
                            f"Kept or older ({unit})"], rows, w))
    rest = [a for a in trail.accounts if not a.headline]
    if rest:
        n = len({a.node_id for a in rest})
        total = sum(a.received_cents for a in rest if a.side in ("downstream", "receiver"))
        given = sum(a.sent_cents for a in rest if a.side == "upstream")
        out.append(_p(f"{count_text(n, 'more account')} on the trail are not listed here: they received "
                      f"{amount_text(total, unit)} and paid in {amount_text(given, unit)} of the traced money. "
                      "The trail file lists every account and transfer.", "note"))
    out.append(_p(f"Attribution: pro rata. Each account's balance counts from the start of the window; every "
                  f"transfer out carries the traced share of what the account held then. Transfers carrying "
                  f"under {_percent(trail)} of the alerted amount are counted, not followed. Amounts in "
                  f"{unit} at the reference rates, rounded to 4 significant digits; trail {trail.trail_id}.",
                  "note"))
    return out


def _percent(trail: MoneyTrail) -> str:
    """The trail's share below which a transfer is not followed, as a percentage."""
    share = Fraction(str(dict(trail.params).get("min_share", "1/100")))
    return f"{float(share * 100):g} %"


def _manifest_section(manifest: ReportManifest, manifest_name: str) -> list:
    rows = [
        ("Report id", manifest.report_id, "cell_mono"),
        ("Input SHA-256", manifest.input_sha256, "cell_mono"),
        ("Model digest", manifest.model_digest, "cell_mono"),
        ("Trace id", manifest.trace_id, "cell_mono"),
        ("Code version", manifest.code_version, "cell_mono"),
        ("Seed", str(manifest.seed), "cell_mono"),
        *((_EXTRA_LABELS.get(k, k), v, "cell_mono") for k, v in manifest.extra),
    ]
    return [KeepTogether([
        Paragraph("Manifest", STYLES["h2"]),
        _key_value_table(rows),
        Spacer(1, 3),
        _p(f"This PDF's SHA-256 and the {SIGNATURE_ALGORITHM} signature over the manifest are "
           f"recorded in {manifest_name} (a file cannot contain its own hash).", "note"),
    ])]


_EXTRA_LABELS = {
    "profile": "Compliance profile",
    "run_id": "Run id",
    "audit_chain_id": "Audit chain id",
    "source_offset": "Source offset",
    "graph_query": "Graph query",
    "trail_id": "Money trail id",
    "renderer": "Renderer",
    "pdf_creation_date": "PDF creation date",
    "signature_algorithm": "Signature algorithm",
}


# ----------------------------------------------------------------------------- entry point


def render_alert_pdf(case: ReportCase, manifest: ReportManifest) -> bytes:
    """The report PDF as bytes (pure: no files written). :class:`~reports.profile.ProfileError`
    when the case lacks a field its profile requires."""
    profile = load_profile(case.profile)
    stem = report_file_stem(case.alert.alert_id)
    story: list = [
        Paragraph(escape(f"AML alert report: {case.alert.alert_id}"), STYLES["title"]),
        _p(f"Report {manifest.report_id}. Figures before the appendix are rounded; the appendix and the "
           "report's files hold the exact values.", "note"),
    ]
    only = profile.subject_only  # a notice to the data subject: no other account's data
    story += _plain_summary_section(case)
    story += _case_header(case, profile)
    if case.trail is not None and not only:
        story += _trail_section(case.trail)
    if not only:
        story += _narrative_from(case)
    story += _typology_section([(n, "" if only else e) for n, e in case.typologies])
    story += _compliance_section(case, profile)
    story += [CondPageBreak(60 * mm), Paragraph("Appendix: exact values", STYLES["title"]),
              _p("Amounts in their original currency and precision, model numbers as exact decimals, "
                 "the reasons' contributions in log-odds.", "note")]
    story += _summary_section(case.alert, subject_only=only)
    story += _drift_section(case.drift)
    story += _reason_section([rc for rc in case.reason_codes if not (only and about_others(rc.feature))])
    if not only:
        story += _trace_section(case.trace)
    story += _lineage_section(case)
    story += _manifest_section(manifest, f"{stem}.manifest.json")
    return build_pdf(
        story, title=f"AML alert report {case.alert.alert_id}",
        subject=f"Alert {case.alert.alert_id}, trace {case.trace.trace_id}, profile {profile.name}",
        keywords=[case.alert.alert_id, manifest.report_id, case.trace.trace_id],
        footer_left=f"auditflow alert report  {case.alert.alert_id}", footer_right=manifest.report_id)


def trace_file_bytes(trace: EvidenceTrace) -> bytes:
    """The complete trace, gzip-compressed deterministically (no name, mtime 0)."""
    return gzip.compress((trace.to_json() + "\n").encode(), compresslevel=9, mtime=0)


def _narrative_manifest_fields(n: str | Narrative | None) -> tuple[tuple[str, str], ...]:
    """What the manifest records of a narrator's narrative: the model digest and the runtime that
    ran it (the same file gives other samples under another runtime), the decoding parameters
    (RFC 8785 JSON), the seed and mode, and the template sentences."""
    if not isinstance(n, Narrative):
        return ()
    from auditflow.canonical import canonical_json

    runtime = dict(n.stats).get("runtime")
    return (("narrative_model_digest", n.model_digest),
            *((("narrative_runtime", str(runtime)),) if runtime else ()),
            ("narrative_decoding", canonical_json(dict(n.decoding)).decode()),
            ("narrative_seed", str(n.seed)),
            ("narrative_mode", n.mode),
            ("narrative_template_sentences", ",".join(map(str, n.template_sentences))))


def prepare_alert_report(case: ReportCase) -> tuple[str, list[tuple[str, bytes]], ReportManifest]:
    """The report's file stem, its files as (suffix, bytes) and its manifest before it is placed
    and signed (pure: nothing written). ``ValueError`` when the trace is not rooted at the alert's
    sender or receiver; :class:`~reports.profile.ProfileError` for a profile it cannot fill."""
    alert, trace = case.alert, case.trace
    parties = {alert.event.sender.node_id, alert.event.receiver.node_id}
    if trace.root not in parties:
        raise ValueError(f"trace {trace.trace_id} is rooted at {trace.root!r}, not at the alert's "
                         f"sender or receiver {sorted(parties)}")
    unsigned = ReportManifest(
        report_id=report_id_for(case),
        alert_id=alert.alert_id,
        files=(),
        input_sha256=case.input_sha256,
        model_digest=alert.model_digest,
        trace_id=trace.trace_id,
        code_version=case.code_version,
        seed=case.seed,
        extra=(
            ("profile", case.profile),
            ("renderer", f"reportlab {reportlab.Version}"),
            ("pdf_creation_date", PDF_CREATION_DATE),
            ("signature_algorithm", SIGNATURE_ALGORITHM),
            ("run_id", case.run_id),
            ("audit_chain_id", case.audit_chain_id),
            ("source_offset", str(alert.event.source_offset)),
            ("graph_query", graph_query_text(trace)),
            *_narrative_manifest_fields(case.narrative),
            *((("trail_id", case.trail.trail_id),) if case.trail is not None else ()),
        ),
    )
    pdf = render_alert_pdf(case, unsigned)
    files = [(".pdf", pdf), (".trace.json.gz", trace_file_bytes(trace))]
    if case.trail is not None:
        if case.trail.event_id != alert.event.event_id:
            raise ValueError(f"trail {case.trail.trail_id} follows transfer {case.trail.event_id!r}, not the "
                             f"alert's {alert.event.event_id!r}")
        files.append((".trail.json.gz", gzip.compress((case.trail.to_json() + "\n").encode(), compresslevel=9,
                                                       mtime=0)))
    return report_file_stem(alert.alert_id), files, unsigned


def make_case(alert: Alert, trace: EvidenceTrace, reason_codes: Sequence[ReasonCode], *, input_sha256: str,
              code_version: str, seed: int, typologies: Sequence[tuple[str, str]] = (),
              narrative: str | Narrative | None = None, drift: Sequence[DriftStatus] | None = None,
              profile: str = DEFAULT_PROFILE, institution: str | None = None,
              contact: str | None = None, trail: MoneyTrail | None = None,
              sar: SarContext | None = None) -> ReportCase:
    return ReportCase(alert, trace, tuple(reason_codes), input_sha256, code_version, seed,
                      tuple((str(n), str(e)) for n, e in typologies), narrative,
                      None if drift is None else tuple(drift), profile, institution, contact, trail, sar)


def render_alert_report(
    alert: Alert,
    trace: EvidenceTrace,
    reason_codes: list[ReasonCode],
    *,
    out_dir: str | Path,
    signer: Signer,
    **case: object,
) -> ReportManifest:
    """Publish the alert's report in ``out_dir`` (a :class:`~reports.store.ReportStore`):
    ``<stem>.pdf``, the complete trace as ``<stem>.trace.json.gz`` and the signed
    ``<stem>.manifest.json`` that hashes both, appended to ``out_dir/audit_log.jsonl``. Identical
    content already there is left as is; different content becomes ``<stem>@2``... ``case``:
    the keywords of :func:`make_case` (``input_sha256``, ``code_version``, ``seed``,
    ``typologies``, ``narrative``, ``drift``, ``profile``, ``institution``, ``contact``).

    Raises ``ValueError`` when the trace is not rooted at the alert's sender or receiver, the
    profile cannot be filled, or ``signer`` is no :class:`~reports.signing.Signer`.
    """
    from reports.store import ReportStore

    if not isinstance(signer, Signer):
        raise ValueError(f"signer must be a reports.signing.Signer, got {type(signer).__name__}")
    stem, contents, unsigned = prepare_alert_report(make_case(alert, trace, reason_codes, **case))
    return ReportStore(out_dir, signer).publish(stem, contents, unsigned).manifest


# ----------------------------------------------------------------------------- a run's reports


@dataclass(frozen=True, slots=True)
class ReportFailure:
    """A report that could not be written: which alert, and why (``"ExceptionType: message"``)."""

    alert_id: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"alert_id": self.alert_id, "reason": self.reason}


def _unicode_text(text: str) -> str:
    """``text`` with what UTF-8 cannot encode (lone surrogates) written as ``\\udXXX``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


_MAX_REASON = 500


class ReportWriter:
    """Writes the per-alert reports of one run into a :class:`~reports.store.ReportStore`.

    Opening repairs what a crashed run left (:attr:`repaired`). :meth:`write` never lets one
    alert stop the run: a report that raises is recorded as a :class:`ReportFailure` (audit log
    kind ``report_failed``, with the alert id and the reason) and the next alert is written as
    usual, so ``attempted == len(written) + len(failed)``. :meth:`finish` writes the signed tree
    head at the end of the run.
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        input_sha256: str,
        code_version: str,
        seed: int,
        signer: Signer,
        profile: str = DEFAULT_PROFILE,
        institution: str | None = None,
        contact: str | None = None,
    ) -> None:
        from reports.store import ReportStore

        # an unknown or malformed profile, or one the institution and contact cannot fill, stops
        # the run before any report
        check_organisation(load_profile(profile), institution, contact)
        self.out_dir = Path(out_dir)
        self.store = ReportStore(self.out_dir, signer)
        self.repaired = self.store.repair()
        self._args = dict(input_sha256=input_sha256, code_version=code_version, seed=seed, profile=profile,
                          institution=institution, contact=contact)
        self.written: list[ReportManifest] = []
        self.unchanged: list[ReportManifest] = []  # identical reports already there (a rerun)
        self.failed: list[ReportFailure] = []

    @property
    def attempted(self) -> int:
        return len(self.written) + len(self.unchanged) + len(self.failed)

    def write(
        self,
        alert: Alert,
        trace: EvidenceTrace,
        reason_codes: list[ReasonCode],
        *,
        typologies: Sequence[tuple[str, str]] = (),
        narrative: str | Narrative | None = None,
        drift: Sequence[DriftStatus] | None = None,
        trail: MoneyTrail | None = None,
        sar: SarContext | None = None,
    ) -> ReportManifest | ReportFailure:
        """The alert's report (see :func:`render_alert_report`), or why it could not be written."""
        try:
            stem, contents, unsigned = prepare_alert_report(make_case(
                alert, trace, reason_codes, typologies=typologies, narrative=narrative, drift=drift, trail=trail,
                sar=sar, **self._args))
            published = self.store.publish(stem, contents, unsigned)
        except Exception as e:  # noqa: BLE001 - any failure of one report is recorded, not raised
            failure = ReportFailure(alert.alert_id, _unicode_text(f"{type(e).__name__}: {e}"[:_MAX_REASON]))
            self.failed.append(failure)
            # canonical JSON carries valid Unicode only: a lone surrogate as \\udXXX
            self.store.record("report_failed", {k: _unicode_text(v) for k, v in failure.to_dict().items()})
            return failure
        (self.unchanged if published.status == "unchanged" else self.written).append(published.manifest)
        return published.manifest

    def finish(self):
        """Sign and write the tree head (``tree_head.json``); returns it."""
        return self.store.finish()
