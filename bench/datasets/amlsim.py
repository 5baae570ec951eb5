"""IBM AMLSim -> AMLworld: the converters (pure) and the code that builds and runs AMLSim.

AMLSim (the public IBM/AMLSim repository) stays outside this repository: ``build.py`` takes its
source folder (``--amlsim-src``), exports it into ``.cache/datasets/``, swaps the pom's MASON
dependency there and runs its pipeline with our configurations (:data:`CONFIGS`, written by
:func:`write_params`): ``scripts/transaction_graph_generator.py`` (Python 3.7, networkx 1.11),
the Java simulator ``amlsim.AMLSim``, ``scripts/convert_logs.py``. Its outputs, read here, are
those ``convert_logs.py`` writes under AMLSim's standard ``schema.json``:

* ``transactions.csv``: ``tran_id,orig_acct,bene_acct,tx_type,base_amt,tran_timestamp,is_sar,alert_id``
  (``tran_timestamp`` the step's day, ``2022-09-01T00:00:00Z``; ``is_sar`` ``True``/``False``;
  ``alert_id`` ``-1`` outside alerts);
* ``accounts.csv``: ``acct_id``, ..., ``bank_id``, ...;
* ``alert_transactions.csv``:
  ``alert_id,alert_type,is_sar,tran_id,orig_acct,bene_acct,tx_type,base_amt,tran_timestamp``.

**Conversion** (:func:`convert_transactions`, :func:`alert_blocks`):

* time: the day of ``tran_timestamp`` (one AMLSim step is one day from ``general.base_date``),
  the minute from :func:`bench.datasets.common.day_minutes` (seeded by the set's seed and the
  day; the k-th transaction of a day in ``tran_id`` order gets the k-th sorted minute);
* banks: AMLSim bank names sorted, the i-th is ``bank_id(i)`` (``001``, ``002``, ...);
  accounts: :func:`bench.datasets.common.account_id` of the integer id;
* amount: ``base_amt`` to two decimals, ``US Dollar`` both sides (AMLSim has one currency);
* payment format: :data:`TX_TYPE_FORMATS` (an unknown type is an error);
* ``Is Laundering``: ``is_sar``;
* answer key: one block per alert whose ``is_sar`` is true, typology by
  :data:`ALERT_TYPOLOGIES`, qualifier ``AMLSim alert <id>``, its transactions (joined by
  ``tran_id``; by content where ``convert_logs`` dropped a repeated row) in time order.
  False alerts (``is_sar`` false) are kept as ordinary rows and get no block.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path

from bench.datasets.common import (
    Block,
    account_id,
    amount,
    bank_id,
    cache_key,
    cached_meta,
    day_minutes,
    hhmm,
    row,
    summary,
    write_set,
)

#: Bump when the conversion changes: cached sets made by another version are rebuilt.
CONVERTER_VERSION = 1

#: AMLSim transaction type (the ``Type`` of our ``transactionType.csv``) -> AMLworld payment format.
TX_TYPE_FORMATS = {
    "TRANSFER": "ACH",
    "WIRE": "Wire",
    "CHECK": "Cheque",
    "CREDIT": "Credit Card",
    "CASH-IN": "Cash",
    "CASH-OUT": "Cash",
}
#: Cash rows name a branch, not an account; ``convert_logs`` writes them to ``cash_tx.csv`` (and
#: this AMLSim version never makes one): skipped if they appear in ``transactions.csv``.
CASH_TYPES = frozenset({"CASH-IN", "CASH-OUT"})
#: AMLSim alert pattern (``alertPatterns.csv`` ``type``, ``alert_type`` in its outputs) -> AMLworld typology.
ALERT_TYPOLOGIES = {
    "fan_out": "FAN-OUT",
    "fan_in": "FAN-IN",
    "cycle": "CYCLE",
    "bipartite": "BIPARTITE",
    "stack": "STACK",
    "random": "RANDOM",
    "scatter_gather": "SCATTER-GATHER",
    "gather_scatter": "GATHER-SCATTER",
}


# ---------------------------------------------------------------- the converters (pure)


def _flag(text: str, what: str) -> bool:
    t = text.strip().lower()
    if t in ("true", "1", "yes"):
        return True
    if t in ("false", "0", "no"):
        return False
    raise ValueError(f"{what}: expected True/False, got {text!r}")


def _day(ts: str) -> str:
    """``2022-09-01T00:00:00Z`` (or ``2022-09-01``) -> ``2022-09-01``."""
    day = ts.strip()[:10]
    datetime.strptime(day, "%Y-%m-%d")  # raises on anything else
    return day


@dataclass
class ConvertedTransactions:
    """AMLworld rows in time order, and how to find a source transaction's row."""

    rows: list[tuple[str, ...]]
    by_tran_id: dict[str, int]  # AMLSim tran_id -> index in rows
    by_content: dict[tuple[str, str, str, str, str], int]  # (orig, bene, type, base_amt, day) -> first index
    banks: dict[str, str]  # AMLSim bank name -> our bank id
    skipped_cash: int = 0


def bank_map(accounts: Iterable[Mapping[str, str]]) -> tuple[dict[str, str], dict[str, str]]:
    """(account id -> AMLSim bank name, AMLSim bank name -> our bank id) from ``accounts.csv`` rows."""
    acct_bank = {}
    for a in accounts:
        acct_bank[a["acct_id"].strip()] = a["bank_id"].strip()
    banks = {name: bank_id(i) for i, name in enumerate(sorted(set(acct_bank.values())))}
    return acct_bank, banks


def convert_transactions(transactions: Iterable[Mapping[str, str]], accounts: Iterable[Mapping[str, str]], *,
                         seed: int) -> ConvertedTransactions:
    """``transactions.csv`` rows (dicts by AMLSim's column names) and ``accounts.csv`` rows ->
    AMLworld rows sorted by time (day, then ``tran_id``), minutes by :func:`day_minutes`."""
    acct_bank, banks = bank_map(accounts)
    items: list[tuple[str, int, Mapping[str, str]]] = []
    skipped = 0
    for t in transactions:
        ttype = t["tx_type"].strip()
        if ttype in CASH_TYPES:
            skipped += 1
            continue
        if ttype not in TX_TYPE_FORMATS:
            raise ValueError(f"transaction {t['tran_id']}: unknown AMLSim transaction type {ttype!r}")
        items.append((_day(t["tran_timestamp"]), int(t["tran_id"]), t))
    items.sort(key=lambda it: (it[0], it[1]))
    per_day = Counter(day for day, _, _ in items)
    minutes: dict[str, list[int]] = {}
    out = ConvertedTransactions([], {}, {}, banks, skipped)
    for day, _, t in items:
        if day not in minutes:
            minutes[day] = day_minutes(per_day[day], seed=seed, day=day)[::-1]  # pop() from the end
        ts = f"{day.replace('-', '/')} {hhmm(minutes[day].pop())}"
        orig, bene = t["orig_acct"].strip(), t["bene_acct"].strip()
        for a in (orig, bene):
            if a not in acct_bank:
                raise ValueError(f"transaction {t['tran_id']}: account {a} is not in accounts.csv")
        ttype, amt = t["tx_type"].strip(), t["base_amt"].strip()
        r = row(ts, banks[acct_bank[orig]], account_id(orig), banks[acct_bank[bene]], account_id(bene), amount(amt),
                TX_TYPE_FORMATS[ttype], _flag(t["is_sar"], f"transaction {t['tran_id']} is_sar"))
        i = len(out.rows)
        out.rows.append(r)
        out.by_tran_id[t["tran_id"].strip()] = i
        out.by_content.setdefault((orig, bene, ttype, amt, day), i)
    return out


@dataclass
class AlertStats:
    alerts: int = 0
    sar_alerts: int = 0
    false_alerts: int = 0  # is_sar false: ordinary rows, no block
    alerts_without_rows: int = 0  # SAR alerts none of whose transactions is in transactions.csv
    alert_rows_unmatched: int = 0  # alert transactions found neither by tran_id nor by content
    alert_rows_not_laundering: int = 0  # matched a row whose Is Laundering is 0 (left out of the block)
    attempts_by_typology: dict[str, int] = field(default_factory=dict)


def alert_blocks(alert_transactions: Iterable[Mapping[str, str]],
                 converted: ConvertedTransactions) -> tuple[list[Block], AlertStats]:
    """``alert_transactions.csv`` rows -> one answer-key block per SAR alert (by alert id), its
    rows those of :func:`convert_transactions` in time order."""
    groups: dict[int, list[Mapping[str, str]]] = defaultdict(list)
    for a in alert_transactions:
        groups[int(a["alert_id"])].append(a)
    stats = AlertStats()
    blocks = []
    for alert in sorted(groups):
        members = groups[alert]
        stats.alerts += 1
        kinds = {m["alert_type"].strip() for m in members}
        sars = {_flag(m["is_sar"], f"alert {alert} is_sar") for m in members}
        if len(kinds) != 1 or len(sars) != 1:
            raise ValueError(f"alert {alert}: mixed alert_type {sorted(kinds)} or is_sar {sorted(sars)}")
        kind = kinds.pop()
        if kind not in ALERT_TYPOLOGIES:
            raise ValueError(f"alert {alert}: unknown AMLSim alert type {kind!r}")
        if not sars.pop():
            stats.false_alerts += 1
            continue
        stats.sar_alerts += 1
        found = set()
        for m in members:
            i = converted.by_tran_id.get(m["tran_id"].strip())
            if i is None:
                key = (m["orig_acct"].strip(), m["bene_acct"].strip(), m["tx_type"].strip(), m["base_amt"].strip(),
                       _day(m["tran_timestamp"]))
                i = converted.by_content.get(key)
            if i is None:
                stats.alert_rows_unmatched += 1
            elif converted.rows[i][-1] != "1":
                stats.alert_rows_not_laundering += 1
            else:
                found.add(i)
        if not found:
            stats.alerts_without_rows += 1
            continue
        typology = ALERT_TYPOLOGIES[kind]
        blocks.append(Block(typology, f"AMLSim alert {alert}", tuple(converted.rows[i] for i in sorted(found))))
        stats.attempts_by_typology[typology] = stats.attempts_by_typology.get(typology, 0) + 1
    return blocks, stats


# ---------------------------------------------------------------- our configurations


@dataclass(frozen=True)
class Pattern:
    """One row of ``alertPatterns.csv``. Periods are days (steps); AMLSim draws each alert's size
    and period uniformly from the ranges. ``schedule_id`` means what each AMLSim typology class
    makes of it: fan-out 3 and fan-in 1 are "simultaneous" (every transfer on one day of the
    window), cycle 1 "ordered random steps"; random, scatter-gather and gather-scatter ignore it.

    Fan-in and fan-out are simultaneous on purpose: AMLSim's ``FanInTypology``/``FanOutTypology``
    reset their window's start to ``generateStartStep(interval)``, a step near 0, so any other
    schedule spreads their transfers from the first days of the simulation to the planned end
    (12 to 130 days apart in a 150-day trial), whatever the period asked for."""

    type: str
    count: int
    min_accounts: int
    max_accounts: int
    min_amount: float
    max_amount: float
    min_period: int
    max_period: int
    schedule_id: int = 2


@dataclass(frozen=True)
class Config:
    """One AMLSim simulation set-up, written out by :func:`write_params` and :func:`conf_json`.

    ``min_amount``/``max_amount`` (conf ``default``) bound every simulated amount, normal and
    alert alike (AMLSim's ``TargetedTransactionAmount``), below the sender's balance; the
    patterns' own amounts seed the alert plans (scatter-gather's target)."""

    name: str
    about: str
    banks: tuple[tuple[str, int], ...]  # (AMLSim bank name, accounts in it)
    min_balance: float
    max_balance: float
    min_amount: float
    max_amount: float
    total_steps: int  # days
    patterns: tuple[Pattern, ...]
    normal_models: tuple[tuple[str, int], ...]  # (AMLSim normal model type, count)
    tx_types: tuple[tuple[str, int], ...] = (("TRANSFER", 50), ("WIRE", 10), ("CHECK", 20), ("CREDIT", 20))
    degree_threshold: int = 10
    transaction_interval: int = 7
    margin_ratio: float = 0.1
    base_date: str = "2022-09-01"

    @property
    def accounts(self) -> int:
        return sum(n for _, n in self.banks)

    def to_dict(self) -> dict:
        return asdict(self)

    def quick(self) -> Config:
        """A third of the accounts, models and alerts over half the days (a smoke run)."""
        return replace(
            self,
            name=f"{self.name}-quick",
            banks=tuple((b, max(100, n // 3)) for b, n in self.banks),
            total_steps=max(60, self.total_steps // 2),
            patterns=tuple(replace(p, count=max(1, p.count // 3)) for p in self.patterns),
            normal_models=tuple((t, max(1, n // 3)) for t, n in self.normal_models),
        )


_NORMAL = (("single", 500), ("fan_out", 500), ("fan_in", 500), ("forward", 500), ("mutual", 500), ("periodical", 500))

#: AMLSim's bipartite and stack alerts are left out: at this AMLSim version their Java models
#: log transactions through the normal-transaction call (``isSAR`` 0, ``alertID`` -1), so they
#: never reach the SAR flag or ``alert_transactions.csv``, and only the alert's main account
#: ever sends (stack's second layer never runs). See README.md.
CONFIGS: dict[str, Config] = {
    c.name: c
    for c in (
        Config(
            name="days",
            about="small alerts (3-6 accounts) over days (4-10), small amounts (100-1,000; balances 50k-100k)",
            banks=(("bank_a", 500), ("bank_b", 500), ("bank_c", 500)),
            min_balance=50_000,
            max_balance=100_000,
            min_amount=100,
            max_amount=1_000,
            total_steps=300,
            patterns=(
                Pattern("fan_out", 12, 4, 6, 100, 1_000, 4, 10, schedule_id=3),
                Pattern("fan_in", 12, 4, 6, 100, 1_000, 4, 10, schedule_id=1),
                Pattern("cycle", 12, 3, 6, 100, 1_000, 4, 10, schedule_id=1),
                Pattern("random", 12, 3, 6, 100, 1_000, 4, 10),
                Pattern("scatter_gather", 12, 4, 6, 100, 1_000, 4, 10),
                Pattern("gather_scatter", 12, 5, 7, 100, 1_000, 4, 10),
            ),
            normal_models=_NORMAL,
        ),
        Config(
            name="weeks",
            about="large alerts (8-16 accounts) over weeks (14-56 days), large amounts (1,000-25,000; "
            "balances 500k-2M)",
            banks=(("bank_a", 700), ("bank_b", 700), ("bank_c", 600)),
            min_balance=500_000,
            max_balance=2_000_000,
            min_amount=1_000,
            max_amount=25_000,
            total_steps=365,
            patterns=(
                Pattern("fan_out", 6, 8, 16, 5_000, 25_000, 14, 56, schedule_id=3),
                Pattern("fan_in", 6, 8, 16, 5_000, 25_000, 14, 56, schedule_id=1),
                Pattern("cycle", 6, 8, 12, 5_000, 25_000, 14, 56, schedule_id=1),
                Pattern("random", 6, 8, 12, 5_000, 25_000, 14, 56),
                Pattern("scatter_gather", 6, 8, 16, 5_000, 25_000, 14, 56),
                Pattern("gather_scatter", 6, 9, 17, 5_000, 25_000, 14, 56),
            ),
            normal_models=tuple((t, 600) for t, _ in _NORMAL),
        ),
    )
}


def degree_rows(n: int, *, threshold: int) -> list[tuple[int, int, int]]:
    """``degree.csv`` rows (count, in-degree, out-degree) for ``n`` accounts: each degree
    ``floor(2.5 * paretovariate(1.5))`` capped at 60 (a heavy tail: about one account in eight
    reaches the hub ``threshold`` of 10), then in- and out-degrees evened out one at a time
    (their sums must be equal); deterministic in ``n``."""
    import random

    rng = random.Random(f"degree:{n}")
    ins = [min(60, int(2.5 * rng.paretovariate(1.5))) for _ in range(n)]
    outs = [min(60, int(2.5 * rng.paretovariate(1.5))) for _ in range(n)]
    while sum(ins) != sum(outs):
        (ins if sum(ins) < sum(outs) else outs)[rng.randrange(n)] += 1
    if not any(max(i, o) >= threshold for i, o in zip(ins, outs, strict=True)):
        raise ValueError(f"no hub account (degree >= {threshold}) among {n}")
    counts = Counter(zip(ins, outs, strict=True))
    return [(c, i, o) for (i, o), c in sorted(counts.items())]


def _write_csv(path: Path, header: Iterable[str], rows: Iterable[Iterable[object]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def write_params(cfg: Config, param_dir: Path) -> None:
    """Our parameter CSVs (AMLSim's documented columns) for ``cfg``."""
    param_dir.mkdir(parents=True, exist_ok=True)
    _write_csv(param_dir / "accounts.csv",
               ("count", "min_balance", "max_balance", "country", "business_type", "bank_id"),
               [(n, cfg.min_balance, cfg.max_balance, "US", "I", b) for b, n in cfg.banks])
    _write_csv(param_dir / "degree.csv", ("Count", "In-degree", "Out-degree"),
               degree_rows(cfg.accounts, threshold=cfg.degree_threshold))
    _write_csv(param_dir / "alertPatterns.csv",
               ("count", "type", "schedule_id", "min_accounts", "max_accounts", "min_amount", "max_amount",
                "min_period", "max_period", "bank_id", "is_sar"),
               [(p.count, p.type, p.schedule_id, p.min_accounts, p.max_accounts, p.min_amount, p.max_amount,
                 p.min_period, p.max_period, "", "True") for p in cfg.patterns])
    sizes = {"single": (1, 1), "fan_out": (5, 20), "fan_in": (5, 20), "forward": (3, 3), "mutual": (2, 2),
             "periodical": (2, 2)}
    _write_csv(param_dir / "normalModels.csv",
               ("count", "type", "schedule_id", "min_accounts", "max_accounts", "min_period", "max_period", "bank_id"),
               [(n, t, 2, *sizes[t], 5, 20, "") for t, n in cfg.normal_models])
    _write_csv(param_dir / "transactionType.csv", ("Type", "Frequency"), cfg.tx_types)


def conf_json(cfg: Config, *, seed: int, sim_name: str, run_dir: Path, param_dir: Path, schema: Path) -> dict:
    """AMLSim's ``conf.json`` for one run, every path absolute (so no working directory matters)."""
    cash = {"normal_interval": 100, "fraud_interval": 50, "normal_min_amount": 50, "normal_max_amount": 100,
            "fraud_min_amount": 500, "fraud_max_amount": 1000}
    return {
        "general": {"random_seed": seed, "simulation_name": sim_name, "total_steps": cfg.total_steps,
                    "base_date": cfg.base_date},
        "default": {
            "min_amount": cfg.min_amount, "max_amount": cfg.max_amount,
            "min_balance": cfg.min_balance, "max_balance": cfg.max_balance,
            "start_step": -1, "end_step": -1, "start_range": -1, "end_range": -1,
            "transaction_model": 1, "margin_ratio": cfg.margin_ratio, "bank_id": "default",
            "cash_in": cash, "cash_out": cash,
        },
        "input": {
            "directory": str(param_dir), "schema": str(schema), "accounts": "accounts.csv",
            "alert_patterns": "alertPatterns.csv", "normal_models": "normalModels.csv", "degree": "degree.csv",
            "transaction_type": "transactionType.csv", "is_aggregated_accounts": True,
        },
        "temporal": {"directory": str(run_dir / "tmp"), "transactions": "transactions.csv",
                     "accounts": "accounts.csv", "alert_members": "alert_members.csv",
                     "normal_models": "normal_models.csv"},
        "output": {
            "directory": str(run_dir / "outputs"), "accounts": "accounts.csv", "transactions": "transactions.csv",
            "cash_transactions": "cash_tx.csv", "alert_members": "alert_accounts.csv",
            "alert_transactions": "alert_transactions.csv", "sar_accounts": "sar_accounts.csv",
            "party_individuals": "individuals-bulkload.csv", "party_organizations": "organizations-bulkload.csv",
            "account_mapping": "accountMapping.csv", "resolved_entities": "resolvedentities.csv",
            "transaction_log": "tx_log.csv", "counter_log": "tx_count.csv", "diameter_log": "diameter.csv",
        },
        "graph_generator": {"degree_threshold": cfg.degree_threshold, "high_risk_countries": "",
                            "high_risk_business": ""},
        "simulator": {"compute_diameter": False, "transaction_limit": 0,
                      "transaction_interval": cfg.transaction_interval, "sar_interval": 7,
                      "sar_balance_ratio": 1.0, "numBranches": 1000},
    }


# ---------------------------------------------------------------- AMLSim's source, build and tools

#: What its Python scripts import (transaction_graph_generator.py, convert_logs.py and scripts/amlsim/):
#: networkx 1.x's API (and the decorator it was released with), numpy, dateutil, Faker.
PY37_REQUIREMENTS = ("networkx==1.11", "decorator<5", "numpy<1.22", "python-dateutil", "Faker<20")
#: MASON 20 (the pom's ``mason:mason:20``) is on no public Maven repository; MASON 18 is on
#: Maven Central under this name and AMLSim compiles and runs against it.
MASON = ("fr.irit.smac.thirdparty.edu.gmu.cs", "mason", "18")
_POM_MASON = re.compile(r"<groupId>\s*mason\s*</groupId>(\s*)<artifactId>\s*mason\s*</artifactId>(\s*)"
                        r"<version>\s*20\s*</version>")
Log = Callable[[str], None]


@dataclass(frozen=True)
class Source:
    path: Path
    kind: str  # "bare" (a bare git repository), "checkout" (a work tree), "dir" (no git)
    commit: str


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout.strip()


def resolve_source(path: Path) -> Source:
    """AMLSim's source at ``path``: a bare git repository (its HEAD), a git checkout (its HEAD's
    commit; uncommitted changes are not exported) or a plain folder (a digest of its files)."""
    path = Path(path).resolve()
    if not path.is_dir():
        raise FileNotFoundError(
            f"no AMLSim source at {path}: get the public IBM/AMLSim repository, e.g. "
            f"`git clone https://github.com/IBM/AMLSim {path}`, or pass --amlsim-src DIR")
    if (path / "HEAD").is_file() and (path / "objects").is_dir() and not (path / ".git").exists():  # bare
        return Source(path, "bare", _git("--git-dir", str(path), "rev-parse", "HEAD"))
    if (path / ".git").exists():
        return Source(path, "checkout", _git("-C", str(path), "rev-parse", "HEAD"))
    import hashlib

    h = hashlib.sha256()
    for p in sorted(q for q in path.rglob("*") if q.is_file() and ".git" not in q.parts):
        rel = p.relative_to(path).as_posix()
        if rel == "pom.xml" or rel.startswith(("src/", "scripts/", "paramFiles/")):
            h.update(rel.encode() + b"\0" + p.read_bytes() + b"\0")
    return Source(path, "dir", "tree-" + h.hexdigest()[:32])


def export_source(src: Source, dest: Path) -> None:
    """A copy of the source's files (``git archive HEAD`` for git sources) in ``dest``."""
    dest.mkdir(parents=True)
    if src.kind == "dir":
        shutil.copytree(src.path, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
        return
    git_dir = ["--git-dir", str(src.path)] if src.kind == "bare" else ["-C", str(src.path)]
    archive = dest.parent / (dest.name + ".tar")
    subprocess.run(["git", *git_dir, "archive", "--format=tar", "-o", str(archive), src.commit], check=True)
    with tarfile.open(archive) as tf:
        tf.extractall(dest, filter="data")
    archive.unlink()


def patch_pom(pom: Path) -> None:
    """Replace ``mason:mason:20`` by :data:`MASON` in the (scratch copy's) pom."""
    text = pom.read_text()
    new, n = _POM_MASON.subn(
        rf"<groupId>{MASON[0]}</groupId>\1<artifactId>{MASON[1]}</artifactId>\2<version>{MASON[2]}</version>", text)
    if n != 1 and MASON[0] not in text:
        raise ValueError(f"{pom}: expected one mason:mason:20 dependency, found {n}")
    pom.write_text(new)


def _run(cmd: list[str], *, cwd: Path, log_file: Path, env: dict | None = None, timeout: float = 3600) -> float:
    """Run ``cmd`` with its output in ``log_file``; seconds taken. Fails with the log's tail."""
    t0 = time.perf_counter()
    with open(log_file, "ab") as fh:
        fh.write(f"$ {' '.join(cmd)}\n".encode())
        fh.flush()
        p = subprocess.run(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=timeout)
    if p.returncode != 0:
        tail = log_file.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{cmd[0]} {' '.join(cmd[1:3])} ... exited {p.returncode} (log {log_file}):\n{tail}")
    return time.perf_counter() - t0


def ensure_build(src: Source, cache_dir: Path, log: Log) -> Path:
    """Export and compile AMLSim once per source commit: ``amlsim-build-<commit>/`` with
    ``target/classes`` and ``cp.txt`` (its dependencies' class path); Maven's downloads go to
    ``cache_dir/m2``."""
    bdir = cache_dir / f"amlsim-build-{src.commit[:16]}"
    if (bdir / ".built").is_file():
        return bdir
    shutil.rmtree(bdir, ignore_errors=True)
    log(f"amlsim: exporting {src.path} ({src.kind}, {src.commit[:12]}) and building it in {bdir}")
    export_source(src, bdir)
    for needed in ("pom.xml", "scripts/transaction_graph_generator.py", "scripts/convert_logs.py",
                   "paramFiles/1K/schema.json"):
        if not (bdir / needed).is_file():
            raise FileNotFoundError(f"{src.path} does not look like AMLSim's source: no {needed}")
    patch_pom(bdir / "pom.xml")
    secs = _run(["mvn", "-B", "-q", f"-Dmaven.repo.local={cache_dir / 'm2'}", "-DskipTests", "compile",
                 "dependency:build-classpath", "-Dmdep.outputFile=cp.txt"], cwd=bdir, log_file=bdir / "build.log")
    (bdir / ".built").write_text(json.dumps({"commit": src.commit, "seconds": round(secs, 1)}) + "\n")
    log(f"amlsim: built in {secs:.0f} s")
    return bdir


def find_python37(explicit: str | None) -> str:
    if explicit:
        return explicit
    for cand in sorted(Path.home().glob(".pyenv/versions/3.7*/bin/python3.7"), reverse=True):
        return str(cand)
    found = shutil.which("python3.7")
    if found:
        return found
    raise FileNotFoundError("AMLSim's scripts need Python 3.7 (networkx 1.11): none found; pass --python37 PATH")


def ensure_py37(cache_dir: Path, python37: str, log: Log) -> tuple[Path, dict]:
    """A Python 3.7 venv with :data:`PY37_REQUIREMENTS` at ``cache_dir/py37``; its versions."""
    venv = cache_dir / "py37"
    stamp = venv / ".installed.json"
    if stamp.is_file():
        info = json.loads(stamp.read_text())
        if info.get("requirements") == list(PY37_REQUIREMENTS):
            return venv, info
    shutil.rmtree(venv, ignore_errors=True)
    log(f"amlsim: creating {venv} ({python37}) with {' '.join(PY37_REQUIREMENTS)}")
    subprocess.run([python37, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", *PY37_REQUIREMENTS], check=True)
    versions = subprocess.run(
        [str(venv / "bin/python"), "-c",
         "import sys, json, networkx, numpy, faker; print(json.dumps({'python': sys.version.split()[0], "
         "'networkx': networkx.__version__, 'numpy': numpy.__version__}))"],
        check=True, capture_output=True, text=True).stdout
    info = {"requirements": list(PY37_REQUIREMENTS), **json.loads(versions)}
    stamp.write_text(json.dumps(info) + "\n")
    return venv, info


def java_version() -> str:
    p = subprocess.run(["java", "-version"], capture_output=True, text=True)
    return (p.stderr or p.stdout).splitlines()[0].strip() if (p.stderr or p.stdout) else "unknown"


# ---------------------------------------------------------------- one set


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def set_name(cfg: Config, seed: int) -> str:
    return f"amlsim-{cfg.name}-s{seed}"


def set_key(cfg: Config, seed: int, commit: str) -> str:
    return cache_key({"source": "amlsim", "config": cfg.to_dict(), "seed": seed, "commit": commit,
                      "converter": CONVERTER_VERSION})


def convert_run(out: Path, *, seed: int) -> tuple[list[tuple[str, ...]], list[Block], dict]:
    """Convert one run's ``convert_logs`` outputs (folder ``out``); rows, blocks and counts."""
    conv = convert_transactions(_read_csv(out / "transactions.csv"), _read_csv(out / "accounts.csv"), seed=seed)
    blocks, stats = alert_blocks(_read_csv(out / "alert_transactions.csv"), conv)
    return conv.rows, blocks, {"skipped_cash_rows": conv.skipped_cash, "banks": conv.banks, **asdict(stats)}


def build_set(cfg: Config, seed: int, *, src: Source, cache_dir: Path, python37: str, log: Log,
              tools: dict) -> dict:
    """Run AMLSim for (``cfg``, ``seed``) and write the AMLworld set ``cache_dir/<name>/``; its meta."""
    name = set_name(cfg, seed)
    bdir = ensure_build(src, cache_dir, log)
    venv, py_info = ensure_py37(cache_dir, python37, log)
    run_dir = (cache_dir / "work" / name).resolve()
    shutil.rmtree(run_dir, ignore_errors=True)
    param_dir = run_dir / "params"
    write_params(cfg, param_dir)
    (run_dir / "outputs").mkdir(parents=True)
    conf = conf_json(cfg, seed=seed, sim_name=name, run_dir=run_dir, param_dir=param_dir,
                     schema=(bdir / "paramFiles/1K/schema.json").resolve())
    conf_path = run_dir / "conf.json"
    conf_path.write_text(json.dumps(conf, indent=2) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("RANDOM_SEED", "DEGREE", "PYTHONPATH")}
    env.update(PYTHONHASHSEED="0", TZ="UTC")
    py = str(venv / "bin/python")
    log_file = run_dir / "run.log"
    secs = {}
    log(f"amlsim: {name}: graph generator")
    secs["graph_generator"] = _run([py, str(bdir / "scripts/transaction_graph_generator.py"), str(conf_path)],
                                   cwd=run_dir, log_file=log_file, env=env)
    log(f"amlsim: {name}: simulator")
    cp = f"{bdir / 'target/classes'}:{(bdir / 'cp.txt').read_text().strip()}"
    secs["simulator"] = _run(["java", "-Xmx2g", "-cp", cp, "amlsim.AMLSim", str(conf_path)], cwd=run_dir,
                             log_file=log_file, env=env)
    log(f"amlsim: {name}: convert_logs")
    secs["convert_logs"] = _run([py, str(bdir / "scripts/convert_logs.py"), str(conf_path)], cwd=run_dir,
                                log_file=log_file, env=env)
    t0 = time.perf_counter()
    rows, blocks, counts = convert_run(run_dir / "outputs" / name, seed=seed)
    secs["convert"] = time.perf_counter() - t0
    meta = {
        "source": "amlsim",
        "config": cfg.name,
        "config_about": cfg.about,
        "config_params": cfg.to_dict(),
        "seed": seed,
        "name": name,
        "cache_key": set_key(cfg, seed, src.commit),
        "converter_version": CONVERTER_VERSION,
        "tools": {"amlsim_commit": src.commit, "amlsim_source": src.kind, "mason": ":".join(MASON),
                  "java": tools.get("java", ""), **{f"py37_{k}": v for k, v in py_info.items() if k != "requirements"}},
        "mappings": {"tx_type_to_payment_format": TX_TYPE_FORMATS, "alert_type_to_typology": ALERT_TYPOLOGIES,
                     "banks": counts.pop("banks"), "currency": "US Dollar",
                     "time": "day = AMLSim step from general.base_date; minute = common.day_minutes(seed, day)"},
        "counts": summary(rows, blocks),
        "conversion": counts,
        "answer_key": "one block per AMLSim SAR alert (alert_transactions.csv)",
        "run_seconds": {k: round(v, 1) for k, v in secs.items()},
    }
    meta["run_seconds"]["total"] = round(sum(secs.values()), 1)
    write_set(cache_dir / name, name, rows, blocks, meta)
    return meta


def cached(cfg: Config, seed: int, cache_dir: Path, commit: str | None) -> dict | None:
    """The set's meta if it is cached for this source commit (any commit when ``commit`` is None:
    no source at hand, the set's own commit is trusted)."""
    name = set_name(cfg, seed)
    if commit is None:
        meta_path = cache_dir / name / "meta.json"
        if not meta_path.is_file():
            return None
        try:
            commit = json.loads(meta_path.read_text())["tools"]["amlsim_commit"]
        except (ValueError, KeyError):
            return None
    return cached_meta(cache_dir / name, name, set_key(cfg, seed, commit))


if __name__ == "__main__":
    sys.exit("run bench/datasets/build.py")
