"""Build the third-party AML sets in the AMLworld format (AMLSim, synthfin-aml), cached.

    python bench/datasets/build.py                                # all sources, seeds 3,5,7
    python bench/datasets/build.py --source amlsim --amlsim-src ~/src/AMLSim --seeds 3
    python bench/datasets/build.py --quick                        # scaled-down configs, first seed only

Writes ``.cache/datasets/<source>-<config>-s<seed>/`` with ``<that name>_Trans.csv``,
``<that name>_Patterns.txt`` and ``meta.json`` (source, config and its parameters, seed, counts,
laundering rows, attempts per typology, tool versions, run seconds, mappings, and the product
reader's verdict). A set whose ``meta.json`` carries the same key (over the configuration, seed,
converter version and the source's commit or package version) is not made again; ``--force``
makes it again.

Every set, new or cached, must pass the product's reader (``ingest.amlworld``): no rejected row,
every answer-key row equal to a transaction of the file with ``Is Laundering`` 1; else the exit
status is 1. The last line: ``datasets built=N cached=M failed=F rows_min=... laundering_rate_min=...``.

AMLSim's source is not part of this repository (see README.md here): ``--amlsim-src DIR`` (default
``.cache/datasets/amlsim-src``) is a bare git repository, a checkout or a plain folder of it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.datasets import amlsim, synthfin  # noqa: E402
from bench.datasets.common import set_paths  # noqa: E402


def validate(trans: Path, patterns: Path) -> dict:
    """The product's reader over a set: rows, rejects, laundering rows, answer-key rows and how
    many of them equal a laundering row of the file."""
    from auditflow.records import RejectedRecord
    from ingest.amlworld import format_row, parse_row, read_patterns, read_transactions, row_key

    rows = rejects = 0
    laundering: set[str] = set()
    first_reject = None
    for item in read_transactions(trans):
        rows += 1
        if isinstance(item, RejectedRecord):
            rejects += 1
            first_reject = first_reject or f"line {item.offset}: {item.field}: {item.reason}"
        elif item.is_laundering:
            laundering.add(row_key(format_row(item)))
    attempts = pattern_rows = matched = 0
    for attempt in read_patterns(patterns):
        attempts += 1
        for r in attempt.rows:
            pattern_rows += 1
            matched += row_key(format_row(parse_row(list(r), 0))) in laundering
    ok = rejects == 0 and matched == pattern_rows
    return {"ok": ok, "rows": rows, "rejects": rejects, "first_reject": first_reject,
            "laundering_rows_distinct": len(laundering), "attempts": attempts, "pattern_rows": pattern_rows,
            "pattern_rows_matching_laundering": matched}


def _check(meta: dict, cache_dir: Path) -> dict:
    """``meta`` with the reader's verdict (computed, and written to meta.json, when missing)."""
    if "validation" in meta:
        return meta
    paths = set_paths(cache_dir / meta["name"], meta["name"])
    meta["validation"] = validate(paths["trans"], paths["patterns"])
    paths["meta"].write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return meta


def _line(meta: dict, status: str) -> str:
    c, v = meta["counts"], meta["validation"]
    typ = ",".join(f"{k}:{n}" for k, n in c["attempts_by_typology"].items()) or "-"
    return (f"  {status:6} {meta['name']:28} rows={c['rows']} laundering={c['laundering_rows']} "
            f"({100 * c['laundering_rate']:.2f}%) attempts={c['attempts']} [{typ}] "
            f"run_s={meta['run_seconds']['total']} reader={'ok' if v['ok'] else 'FAILED'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", choices=("amlsim", "synthfin", "all"), default="all")
    ap.add_argument("--seeds", default="3,5,7", help="comma-separated seeds (default 3,5,7)")
    ap.add_argument("--configs", help="comma-separated config names (default: all of the source's)")
    ap.add_argument("--quick", action="store_true", help="scaled-down configs (<name>-quick), first seed only")
    ap.add_argument("--force", action="store_true", help="make the sets again even if cached")
    ap.add_argument("--cache-dir", type=Path, default=REPO / ".cache" / "datasets")
    ap.add_argument("--amlsim-src", type=Path, help="AMLSim's source (default CACHE_DIR/amlsim-src)")
    ap.add_argument("--python37", help="Python 3.7 for AMLSim's scripts (default: pyenv's 3.7, else python3.7)")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if args.quick:
        seeds = seeds[:1]
    cache_dir = args.cache_dir.resolve()
    cache_dir.mkdir(parents=True, exist_ok=True)
    wanted = set(args.configs.split(",")) if args.configs else None

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    def pick(configs: dict) -> list:
        chosen = [c for n, c in configs.items() if wanted is None or n in wanted]
        return [c.quick() for c in chosen] if args.quick else chosen

    jobs = []  # (source, config, seed)
    if args.source in ("amlsim", "all"):
        jobs += [("amlsim", c, s) for c in pick(amlsim.CONFIGS) for s in seeds]
    if args.source in ("synthfin", "all"):
        jobs += [("synthfin", c, s) for c in pick(synthfin.CONFIGS) for s in seeds]
    if not jobs:
        ap.error("no configuration selected")

    src = None
    src_error = None
    if any(j[0] == "amlsim" for j in jobs):
        try:
            src = amlsim.resolve_source(args.amlsim_src or cache_dir / "amlsim-src")
        except (FileNotFoundError, OSError) as e:
            src_error = str(e)
    tools = {}

    built = cached_n = failed = 0
    metas = []
    for source, cfg, seed in jobs:
        name = amlsim.set_name(cfg, seed) if source == "amlsim" else synthfin.set_name(cfg, seed)
        try:
            if source == "amlsim":
                meta = None if args.force else amlsim.cached(cfg, seed, cache_dir, src.commit if src else None)
                if meta is None:
                    if src is None:
                        raise RuntimeError(src_error)
                    tools.setdefault("java", amlsim.java_version())
                    meta = amlsim.build_set(cfg, seed, src=src, cache_dir=cache_dir,
                                            python37=amlsim.find_python37(args.python37), log=log, tools=tools)
                    status = "built"
                else:
                    status = "cached"
            else:
                meta = None if args.force else synthfin.cached(cfg, seed, cache_dir)
                if meta is None:
                    meta = synthfin.build_set(cfg, seed, cache_dir=cache_dir, log=log)
                    status = "built"
                else:
                    status = "cached"
            meta = _check(meta, cache_dir)
        except Exception as e:  # one set failing does not stop the others
            failed += 1
            log(f"{name}: FAILED: {e}")
            if not isinstance(e, RuntimeError | FileNotFoundError):
                traceback.print_exc()
            continue
        if not meta["validation"]["ok"]:
            failed += 1
            status = "bad"
        elif status == "built":
            built += 1
        else:
            cached_n += 1
        metas.append(meta)
        print(_line(meta, status), flush=True)

    good = [m for m in metas if m["validation"]["ok"]]
    rows_min = min((m["counts"]["rows"] for m in good), default=0)
    rate_min = min((m["counts"]["laundering_rate"] for m in good), default=0.0)
    print(f"datasets built={built} cached={cached_n} failed={failed} rows_min={rows_min} "
          f"laundering_rate_min={rate_min:.4f}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
