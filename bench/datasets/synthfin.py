"""synthfin-aml (PyPI) -> AMLworld: the converter (pure) and the code that runs the generator.

synthfin-aml 9.2.0 is installed into its own venv (``.cache/datasets/synthfin``), never the
project's. Its ``FraudGraphGenerator.generate_transactions(agents, days, start_date,
fraud_ratio)`` draws background traffic (salary, P2P, merchants, brokers/escrow, mule cover) and
laundering chains (structuring: source -> 4 mules -> broker, 3 or 5 hops; layering: source -> 3
mules -> one broker; round trip: a 3-cycle), then drops transfers the sender cannot pay (and 5 %
at random, every class alike). Its output table, ``to_dataframes()[1]`` written by pandas:

    txn_id,source_id,target_id,timestamp,amount,is_fraud
    0,3518,4176,2024-01-01 00:00:47.123456768,41.93651284,0

**Labels are per transaction** (``is_fraud``): which chain or typology a transfer belongs to is
not kept, and a chain can lose hops to the balance check. So ``Is Laundering`` = ``is_fraud`` and
the answer key is empty (no block can be drawn honestly).

Conversion (:func:`convert_transactions`): the timestamp cut to the minute (``YYYY/MM/DD HH:MM``,
UTC); accounts :func:`bench.datasets.common.account_id` of the agent id; banks (synthfin has none)
``bank_id(crc32(str(agent id)) % 10)``, a fixed hash unrelated to the labels; amount to two
decimals, ``US Dollar``; payment format ``ACH`` for every row (synthfin has no channel).
The package's ``__init__`` imports its torch/PyG dataset class, so ``synthfin_aml_pkg`` is put in
``sys.modules`` as a bare package and only ``synthfin_aml_pkg.generator`` (numpy, pandas, numba)
is imported.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path

from bench.datasets.common import account_id, amount, bank_id, cache_key, cached_meta, row, summary, write_set

CONVERTER_VERSION = 1
VERSION = "9.2.0"
REQUIREMENT = f"synthfin-aml=={VERSION}"
PAYMENT_FORMAT = "ACH"
BANKS = 10
Log = Callable[[str], None]


# ---------------------------------------------------------------- the converter (pure)


def bank_of(agent: int | str, banks: int = BANKS) -> str:
    """The bank id of a synthfin agent: ``bank_id(crc32(str(agent)) % banks)``."""
    return bank_id(zlib.crc32(str(int(agent)).encode()) % banks)


def _minute(ts: str) -> str:
    """pandas' ``2024-01-01 05:23:11.482901120`` -> ``2024/01/01 05:23`` (cut, not rounded)."""
    t = ts.strip()
    if len(t) == 10:
        t += " 00:00"
    dt = datetime.strptime(t[:16], "%Y-%m-%d %H:%M")
    return dt.strftime("%Y/%m/%d %H:%M")


def convert_transactions(transactions: Iterable[Mapping[str, str]], *, banks: int = BANKS) -> list[tuple[str, ...]]:
    """synthfin transaction rows (dicts by its column names) -> AMLworld rows, in time order
    (stable: rows of one minute keep synthfin's order)."""
    out = []
    for t in transactions:
        label = t["is_fraud"].strip()
        if label not in ("0", "1", "True", "False"):
            raise ValueError(f"txn {t['txn_id']}: is_fraud {label!r}")
        src, dst = t["source_id"].strip(), t["target_id"].strip()
        out.append(row(_minute(t["timestamp"]), bank_of(src, banks), account_id(src), bank_of(dst, banks),
                       account_id(dst), amount(t["amount"]), PAYMENT_FORMAT, label in ("1", "True")))
    out.sort(key=lambda r: r[0])
    return out


# ---------------------------------------------------------------- running it


@dataclass(frozen=True)
class Config:
    name: str
    about: str
    agents: int
    days: int
    fraud_ratio: float  # synthfin's knob: chains = agents * 10 * fraud_ratio // 5
    start_date: str = "2024-01-01"

    def to_dict(self) -> dict:
        return asdict(self)

    def quick(self) -> Config:
        return replace(self, name=f"{self.name}-quick", agents=max(500, self.agents // 5), days=max(7, self.days // 3))


CONFIGS: dict[str, Config] = {
    "default": Config("default", "5,000 agents over 30 days, fraud_ratio 0.02 (synthfin's own default ratio)",
                      agents=5_000, days=30, fraud_ratio=0.02),
    # the drift bench's: enough transfers an hour (~440) for hourly windows to be judged (200 a window)
    "dense": Config("dense", "25,000 agents over 30 days, fraud_ratio 0.02 (hourly windows of ~440 transfers)",
                    agents=25_000, days=30, fraud_ratio=0.02),
}

_GENERATE = r"""
import importlib.util, os, sys, types
spec = importlib.util.find_spec("synthfin_aml_pkg")  # locates the package without running its __init__
pkg = types.ModuleType("synthfin_aml_pkg")  # a bare package: its __init__ would import torch
pkg.__path__ = list(spec.submodule_search_locations)
sys.modules["synthfin_aml_pkg"] = pkg
from synthfin_aml_pkg.generator import FraudGraphGenerator  # importable by name: numba's cache needs that
seed, agents, days, start, ratio, out = sys.argv[1:7]
g = FraudGraphGenerator(seed=int(seed))
g.generate_transactions(agents=int(agents), days=int(days), start_date=start, fraud_ratio=float(ratio))
nodes, tx = g.to_dataframes()
tx.to_csv(os.path.join(out, "transactions.csv"), index=False)
nodes.to_csv(os.path.join(out, "nodes.csv"), index=False)
"""

def ensure_venv(cache_dir: Path, log: Log) -> tuple[Path, dict]:
    """``cache_dir/synthfin``: a venv (this interpreter's base Python) with synthfin-aml; its versions."""
    venv = cache_dir / "synthfin"
    stamp = venv / ".installed.json"
    if stamp.is_file():
        info = json.loads(stamp.read_text())
        if info.get("requirement") == REQUIREMENT:
            return venv, info
    shutil.rmtree(venv, ignore_errors=True)
    log(f"synthfin: creating {venv} with {REQUIREMENT}")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", REQUIREMENT], check=True)
    versions = subprocess.run(
        [str(venv / "bin/python"), "-c",
         "import sys, json; from importlib.metadata import version as v; print(json.dumps({'python': "
         "sys.version.split()[0], **{p: v(p) for p in ('synthfin-aml', 'numpy', 'pandas', 'numba')}}))"],
        check=True, capture_output=True, text=True).stdout
    info = {"requirement": REQUIREMENT, **json.loads(versions)}
    stamp.write_text(json.dumps(info) + "\n")
    return venv, info


def set_name(cfg: Config, seed: int) -> str:
    return f"synthfin-{cfg.name}-s{seed}"


def set_key(cfg: Config, seed: int) -> str:
    return cache_key({"source": "synthfin", "config": cfg.to_dict(), "seed": seed, "version": VERSION,
                      "converter": CONVERTER_VERSION, "banks": BANKS})


def cached(cfg: Config, seed: int, cache_dir: Path) -> dict | None:
    name = set_name(cfg, seed)
    return cached_meta(cache_dir / name, name, set_key(cfg, seed))


def build_set(cfg: Config, seed: int, *, cache_dir: Path, log: Log) -> dict:
    name = set_name(cfg, seed)
    venv, info = ensure_venv(cache_dir, log)
    run_dir = (cache_dir / "work" / name).resolve()
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    # it reads start_date as local time; numba's compiled-function cache kept in the venv
    env = {**os.environ, "TZ": "UTC", "PYTHONHASHSEED": "0", "NUMBA_CACHE_DIR": str(venv / "numba-cache")}
    env.pop("PYTHONPATH", None)
    log(f"synthfin: {name}: generating")
    t0 = time.perf_counter()
    with open(run_dir / "run.log", "wb") as fh:
        p = subprocess.run([str(venv / "bin/python"), "-c", _GENERATE, str(seed), str(cfg.agents), str(cfg.days),
                            cfg.start_date, str(cfg.fraud_ratio), str(run_dir)],
                           stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=run_dir)
    if p.returncode != 0:
        raise RuntimeError(f"synthfin generator exited {p.returncode}:\n"
                           f"{(run_dir / 'run.log').read_text(errors='replace')[-3000:]}")
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with open(run_dir / "transactions.csv", newline="", encoding="utf-8") as fh:
        rows = convert_transactions(csv.DictReader(fh))
    conv_s = time.perf_counter() - t0
    meta = {
        "source": "synthfin",
        "config": cfg.name,
        "config_about": cfg.about,
        "config_params": cfg.to_dict(),
        "seed": seed,
        "name": name,
        "cache_key": set_key(cfg, seed),
        "converter_version": CONVERTER_VERSION,
        "tools": {f"venv_{k}": v for k, v in info.items() if k != "requirement"},
        "mappings": {"payment_format": PAYMENT_FORMAT, "banks": f"bank_id(crc32(str(agent)) % {BANKS})",
                     "currency": "US Dollar", "time": "synthfin timestamp (UTC) cut to the minute"},
        "counts": summary(rows, []),
        "answer_key": "empty: synthfin-aml labels transactions only (is_fraud), no chain or typology per transfer",
        "run_seconds": {"generate": round(gen_s, 1), "convert": round(conv_s, 1), "total": round(gen_s + conv_s, 1)},
    }
    write_set(cache_dir / name, name, rows, [], meta)
    return meta


if __name__ == "__main__":
    sys.exit("run bench/datasets/build.py")
