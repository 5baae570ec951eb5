"""The backtracking narrator against plain sampling on generated alerts.

    python bench/narrator.py                 # 50 alerts, CPU (or what --device says)
    python bench/narrator.py --quick         # 6 alerts
    python bench/narrator.py --device cuda   # the same on a GPU

Alerts: :func:`ingest.synthetic.generate` (seeded), one alert per laundering transfer drawn with
a seeded RNG (score 0.9, threshold 0.5: the bench measures narration, not scoring), with two
reason codes computed from the data (the sender's outgoing transfers and distinct payees in the
24 hours up to the transfer), the evidence trace as the deep path asks it (5 hops downstream over
the 3 days after the transfer, :func:`evidence_graph.trace_evidence`) and the typologies detected
around it (:func:`evidence_graph.detect_typologies`, 3 days either side).

Per alert the narrator runs twice with the same model, prompt and seed: ``constrained`` (the
checker, masking and backtracking) and ``baseline`` (plain sampling). Figures:

* ``unsupported_independent``: what the independent checker (:mod:`model_service.fact_audit`, not
  the one the decoder is built around) finds in each constrained narrative, per narrative; must be
  0 (``unsupported_independent_baseline``: the same for plain sampling);
* ``catch_rate`` / ``false_alarm_rate``: that checker on the hand-labelled corpora
  (:mod:`bench.fact_corpus`: 189 unsupported and 185 faithful sentences about three alerts' evidence,
  two of the three sets written after the checker and scored once as written): the share of
  unsupported sentences it flags, of faithful ones it flags; per corpus on stderr;
* ``unsupported_*``: facts (and transfer statements) the evidence does not hold, per narrative
  (:func:`model_service.narrator_facts.unsupported_facts`); constrained must be 0;
* ``fact_recall``: the share of the plan's key facts the constrained narratives state (template
  sentences included); ``fact_recall_model``: stated in sentences the model wrote;
  ``fact_recall_baseline``: the baseline's;
* ``tokens_per_s``: constrained tokens (cue and template tokens included) over its wall time, on
  the narrator's runtime (``runtime``: llama.cpp on the model file's own 4-bit weights by default);
* ``speedup_vs_today``: ``tokens_per_s`` over transformers' own ``generate()`` (sampling as
  many tokens on the same prompt, same temperature and top-k, no checks: how narratives were
  decoded before the narrator; ``tokens_per_s_generate``), in the same run;
* ``overhead_ratio``: constrained wall time over the time plain decoding takes for as many
  tokens (the baseline's seconds per token, prompt included, times the constrained token count);
* ``checker_us_per_token``: masking and checking time per sampled token (a grammar-constraint
  library costs about 50 us per token);
* ``template_fallback_rate``: template sentences over all sentences;
* ``--compare-early N``: the N alerts that backtracked most in the constrained run (the others
  have nothing for an early check to catch) again with ``early_check`` sentence / fact / entropy
  (backtracks, tokens rolled back, template fallbacks, unsupported facts, seconds): whether
  checking at fact slots (always, or when the next-token entropy spikes) helps.

``--corpus-only``: the corpora alone (no model).

Last line: ``narrator unsupported_independent=... catch_rate=... false_alarm_rate=... fact_recall=...
tokens_per_s=... speedup_vs_today=... overhead_ratio=... unsupported_constrained=... unsupported_baseline=...
template_fallback_rate=...``.
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import sys
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fact_corpus import CORPORA, Score, load, score  # noqa: E402

log = functools.partial(print, file=sys.stderr, flush=True)
HORIZON = timedelta(days=3)
DAY = timedelta(days=1)


def generated_alerts(n: int, seed: int):
    """(alert, trace, reason codes, typologies) for ``n`` laundering transfers of a generated set."""
    from auditflow.features import FEATURE_DESCRIPTIONS
    from auditflow.records import Alert, ReasonCode, alert_id_for
    from evidence_graph import NetworkxGraphStore, detect_typologies, trace_evidence
    from ingest.synthetic import generate

    ds = generate(accounts=600, days=8, laundering_rate=0.02, seed=seed)
    store = NetworkxGraphStore()
    store.add_transactions(ds.events)
    by_sender: dict[str, list] = {}
    for ev in ds.events:
        by_sender.setdefault(ev.sender.node_id, []).append(ev)
    start = ds.events[0].timestamp + 2 * DAY
    pool = [ev for ev in ds.events if ev.is_laundering and ev.timestamp >= start and not ev.is_self_transfer]
    rng = random.Random(seed)
    picked = rng.sample(pool, min(n, len(pool)))
    picked.sort(key=lambda e: (e.timestamp, e.event_id))
    out = []
    for ev in picked:
        day = [e for e in by_sender[ev.sender.node_id] if ev.timestamp - DAY < e.timestamp <= ev.timestamp]
        codes = [
            ReasonCode("snd_out_cp_24h", float(len({e.receiver for e in day})), 1.2,
                       FEATURE_DESCRIPTIONS["snd_out_cp_24h"]),
            ReasonCode("snd_out_n_24h", float(len(day)), 0.8, FEATURE_DESCRIPTIONS["snd_out_n_24h"]),
        ]
        codes.sort(key=lambda rc: -rc.value)
        codes = [replace(rc, contribution=1.2 - 0.4 * i) for i, rc in enumerate(codes)]
        alert = Alert(alert_id_for(ev.event_id), ev, 0.9, 0.5, "bench-model", (("amount_usd", 0.0),))
        t = ev.timestamp
        trace = trace_evidence(store, ev.sender.node_id, max_hops=5, direction="out", window=(t, t + HORIZON))
        matches = detect_typologies(store, ev.sender.node_id, window=(t - HORIZON, t + HORIZON))
        out.append((alert, trace, codes, [(m.typology, m.explanation) for m in matches]))
    return out


def plain_generate(lm, prompt: list[int], n: int, params, seed: int) -> tuple[float, int]:
    """Today's way: transformers' own ``generate()`` sampling ``n`` tokens on the same prompt with
    the same temperature and top-k, no checking: (seconds, new tokens)."""
    import torch

    torch.manual_seed(seed)
    x = torch.tensor([prompt], device=lm.device)
    t = time.perf_counter()
    with torch.inference_mode():
        out = lm.model.generate(x, max_new_tokens=n, min_new_tokens=n, do_sample=True, temperature=params.temperature,
                                top_k=params.top_k, pad_token_id=lm.tokenizer.eos_token_id)
    return time.perf_counter() - t, int(out.shape[1]) - len(prompt)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="6 alerts instead of 50")
    ap.add_argument("--alerts", type=int, default=None)
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--threads", type=int, default=None, help="CPU threads")
    ap.add_argument("--runtime", default="auto", choices=("auto", "llama.cpp", "transformers"),
                    help="how the narrator runs the model (auto: llama.cpp on the CPU when installed)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--corpus-only", action="store_true", help="score the fact checker's corpora only (no model)")
    ap.add_argument("--compare-early", type=int, default=None, metavar="N",
                    help="re-run the N alerts that backtracked most with each early_check (default 8, 0 with --quick)")
    args = ap.parse_args()
    n = args.alerts or (6 if args.quick else 50)
    compare = args.compare_early if args.compare_early is not None else (0 if args.quick else 8)

    pooled = Score()
    for name in CORPORA:
        s = score(load(name))
        pooled = pooled.add(s)
        log(f"[corpus] {name}: caught {s.caught}/{s.unsupported}, false alarms {s.false_alarms}/{s.faithful}")
        for kind, sentence in s.missed:
            log(f"  missed ({kind}): {sentence}")
        for sentence, found in s.alarms:
            log(f"  false alarm ({found[0].reason}): {sentence}")
    print(f"catch_rate: {pooled.catch_rate:.4f}")
    print(f"false_alarm_rate: {pooled.false_alarm_rate:.4f}")
    if args.corpus_only:
        print(f"narrator catch_rate={pooled.catch_rate:.3f} false_alarm_rate={pooled.false_alarm_rate:.3f}")
        return

    from model_service.fact_audit import audit, known_of
    from model_service.narrator import DecodingParams, load_model, narrate
    from model_service.narrator_facts import evidence_for, extract_facts, fact_sheet, narrative_plan, unsupported_facts

    t0 = time.perf_counter()
    cases = generated_alerts(n, args.seed)
    log(f"[data] {len(cases)} alerts ({time.perf_counter() - t0:.1f}s)")
    t0 = time.perf_counter()
    lm = load_model(args.device, threads=args.threads, runtime=args.runtime)
    log(f"[model] {lm.device}, {lm.runtime}, {lm.digest[:19]}... loaded in {time.perf_counter() - t0:.1f}s")
    # today's way, for speedup_vs_today: the same file through transformers (float32) and its generate()
    today = lm if lm.runtime == "transformers" else load_model(args.device, threads=args.threads,
                                                                  runtime="transformers")
    params = DecodingParams()
    rows, evidence = [], []
    for i, (alert, trace, codes, typ) in enumerate(cases):
        ev = evidence_for(alert, trace, codes, typ)
        evidence.append(ev)
        items = narrative_plan(alert, trace, codes, typ, evidence=ev)
        keys = {k for it in items for k in it.facts}
        con = narrate(alert, trace, codes, typ, lm=lm, params=params, seed=args.seed + i)
        base = narrate(alert, trace, codes, typ, lm=lm, params=params, seed=args.seed + i, mode="baseline")
        cs, bs = dict(con.stats), dict(base.stats)
        g_s, g_tok = plain_generate(today, today.prompt_ids(fact_sheet(items)), max(8, cs["tokens"]), params,
                                    args.seed + i)
        stated = {f.key for f in extract_facts(con.text, ev)} & keys
        model_keys = {k for s, it in zip(con.sentences, items) if s.source == "model" for k in it.facts}
        model_stated = {f.key for s in con.sentences if s.source == "model" for f in extract_facts(s.text, ev)}
        known = known_of(alert, trace, codes, typ)
        row = {
            "independent_c": len(audit(con.text, known)),
            "independent_b": len(audit(base.text, known)),
            "unsupported_c": len(unsupported_facts(con.text, ev)),
            "unsupported_b": len(unsupported_facts(base.text, ev)),
            "keys": len(keys), "stated": len(stated), "stated_model": len(model_stated & model_keys & keys),
            "stated_b": len({f.key for f in extract_facts(base.text, ev)} & keys),
            "sentences": len(con.sentences), "templates": len(con.template_sentences),
            "c_s": cs["seconds"], "c_tok": cs["tokens"], "c_sampled": cs["tokens_sampled"],
            "b_s": bs["seconds"], "b_tok": bs["tokens"], "check_s": cs["checker_seconds"],
            "backtracks": cs["backtracks"], "rolled": cs["tokens_rolled_back"],
            "g_s": g_s, "g_tok": g_tok,
        }
        rows.append(row)
        log(f"[{i + 1}/{len(cases)}] {alert.alert_id}: {row['sentences']} sentences, {row['templates']} templates, "
            f"{row['backtracks']} backtracks, recall {row['stated']}/{row['keys']}, unsupported "
            f"{row['unsupported_c']} vs baseline {row['unsupported_b']}, {row['c_s']:.1f}s vs {row['b_s']:.1f}s")
        if i == 0:
            log("  constrained: " + con.text)
            log("  baseline:    " + base.text)

    early = {}
    # the alerts whose constrained run backtracked most (ties: in order): where an early check can matter
    chosen = sorted(sorted(range(len(rows)), key=lambda i: -rows[i]["backtracks"])[:compare])
    if compare:
        log(f"[early_check] alerts {[i + 1 for i in chosen]} ({sum(rows[i]['backtracks'] for i in chosen)} backtracks "
            f"with early_check={params.early_check})")
    for mode in ("sentence", "fact", "entropy") if compare else ():
        p = replace(params, early_check=mode)
        acc = {"backtracks": 0, "tokens_rolled_back": 0, "template_fallbacks": 0, "unsupported": 0, "seconds": 0.0}
        for i in chosen:
            alert, trace, codes, typ = cases[i]
            nar = narrate(alert, trace, codes, typ, lm=lm, params=p, seed=args.seed + i)
            st = dict(nar.stats)
            for k in ("backtracks", "tokens_rolled_back", "template_fallbacks", "seconds"):
                acc[k] += st[k]
            acc["unsupported"] += len(unsupported_facts(nar.text, evidence[i]))
        early[mode] = acc
        log(f"[early_check={mode}] {acc}")

    tot = lambda k: sum(r[k] for r in rows)  # noqa: E731
    per_tok_plain = tot("b_s") / max(1, tot("b_tok"))
    overhead = tot("c_s") / max(1e-9, per_tok_plain * tot("c_tok"))
    summary = {
        "alerts": len(rows),
        "unsupported_independent": tot("independent_c") / len(rows),
        "unsupported_independent_baseline": tot("independent_b") / len(rows),
        "unsupported_constrained": tot("unsupported_c") / len(rows),
        "unsupported_baseline": tot("unsupported_b") / len(rows),
        "fact_recall": tot("stated") / max(1, tot("keys")),
        "fact_recall_model": tot("stated_model") / max(1, tot("keys")),
        "fact_recall_baseline": tot("stated_b") / max(1, tot("keys")),
        "overhead_ratio": overhead,
        "tokens_per_s": tot("c_tok") / max(1e-9, tot("c_s")),
        "tokens_per_s_baseline": tot("b_tok") / max(1e-9, tot("b_s")),
        "tokens_per_s_generate": tot("g_tok") / max(1e-9, tot("g_s")),
        "checker_us_per_token": 1e6 * tot("check_s") / max(1, tot("c_sampled")),
        "template_fallback_rate": tot("templates") / max(1, tot("sentences")),
        "backtracks_per_narrative": tot("backtracks") / len(rows),
        "tokens_rolled_back_per_narrative": tot("rolled") / len(rows),
        "seconds_p50_constrained": statistics.median(r["c_s"] for r in rows),
        "seconds_p50_baseline": statistics.median(r["b_s"] for r in rows),
        "device": lm.device,
        "runtime": lm.runtime,
    }
    summary["speedup_vs_today"] = summary["tokens_per_s"] / max(1e-9, summary["tokens_per_s_generate"])
    for k, v in summary.items():
        print(f"{k}: {v:.4f}" if isinstance(v, float) else f"{k}: {v}")
    for mode, acc in early.items():
        print(f"early_check {mode}: " + " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                                                  for k, v in acc.items()))
    print(f"narrator unsupported_independent={summary['unsupported_independent']:.3f} "
          f"catch_rate={pooled.catch_rate:.3f} false_alarm_rate={pooled.false_alarm_rate:.3f} "
          f"fact_recall={summary['fact_recall']:.3f} tokens_per_s={summary['tokens_per_s']:.2f} "
          f"speedup_vs_today={summary['speedup_vs_today']:.3f} "
          f"overhead_ratio={summary['overhead_ratio']:.3f} "
          f"unsupported_constrained={summary['unsupported_constrained']:.3f} "
          f"unsupported_baseline={summary['unsupported_baseline']:.3f} "
          f"template_fallback_rate={summary['template_fallback_rate']:.3f}")


if __name__ == "__main__":
    main()
