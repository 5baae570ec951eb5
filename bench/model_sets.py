"""The data sets the model benchmark runs on, prepared once and cached.

A *set* is a source (``generator``: our own :func:`ingest.synthetic.generate`; ``amlsim-days``,
``amlsim-weeks``: IBM's AMLSim in two configurations; ``synthfin-default``: synthfin-aml; the last
three third-party, made by ``bench/datasets/build.py`` into ``.cache/datasets/``) at one seed.
Preparing it (reading the file, stream features, our graph features, GFP's features) is what costs:
the result is cached under ``.cache/bench/model/`` keyed by the file's bytes (the generator's
parameters) and the bytes of every module that computes a feature, so a change to either computes
it again.
"""

from __future__ import annotations

import hashlib
import pickle
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT / ".cache" / "datasets"
CACHE = ROOT / ".cache" / "bench" / "model"
THIRD_PARTY = ("amlsim-days", "amlsim-weeks", "synthfin-default")
SOURCES = ("generator", *THIRD_PARTY)
#: The generator's size per run kind: (accounts, days).
GENERATOR_SIZE = {"full": (1200, 12), "quick": (250, 10)}
_FEATURE_CODE = ("auditflow/features.py", "auditflow/records.py", "auditflow/money.py", "ingest/amlworld.py",
                 "ingest/synthetic.py", "pipelines/features.py", "evidence_graph/graph_features.py",
                 "evidence_graph/gfp_features.py", "evidence_graph/embedded.py", "evidence_graph/store.py")


@dataclass(frozen=True)
class Prepared:
    """One set as the models see it: events in time order and three aligned feature matrices."""

    name: str  # e.g. "amlsim-weeks-s5"
    source: str
    seed: int
    events: list[Any]  # TransactionEvent
    raw: np.ndarray  # FEATURE_NAMES: the stream's vector (what the cascade reads)
    stream: np.ndarray  # MODEL_STREAM_FEATURES
    graph: np.ndarray  # GRAPH_FEATURE_NAMES
    reference_names: tuple[str, ...]
    reference: np.ndarray  # GFP
    seconds: dict[str, float]  # what preparing cost: stream, graph, gfp


def set_csv(source: str, seed: int, quick: bool) -> Path:
    name = f"{source}-quick-s{seed}" if quick else f"{source}-s{seed}"
    return DATASETS / name / f"{name}_Trans.csv"


def missing_sets(sources, seeds, quick: bool) -> list[Path]:
    return [p for s in sources if s != "generator" for seed in seeds if not (p := set_csv(s, seed, quick)).exists()]


def _code_sha() -> str:
    h = hashlib.sha256()
    for rel in _FEATURE_CODE:
        h.update(rel.encode() + b"\0" + (ROOT / rel).read_bytes())
    return h.hexdigest()


def _events(source: str, seed: int, quick: bool) -> tuple[str, list[Any], bytes]:
    from auditflow.records import RejectedRecord
    from ingest.amlworld import read_transactions

    if source == "generator":
        from ingest.synthetic import generate

        accounts, days = GENERATOR_SIZE["quick" if quick else "full"]
        ds = generate(accounts=accounts, days=days, laundering_rate=0.01, seed=seed)
        return f"generator-{'quick-' if quick else ''}s{seed}", list(ds.events), f"{accounts}:{days}:{seed}".encode()
    path = set_csv(source, seed, quick)
    events = []
    for item in read_transactions(path):
        if isinstance(item, RejectedRecord):
            raise SystemExit(f"{path}: line {item.offset}: rejected by the product's reader: "
                             f"{item.field} {item.value!r}: {item.reason}")
        events.append(item)
    return path.parent.name, events, path.read_bytes()


def prepare(source: str, seed: int, quick: bool) -> Prepared:
    """The set, from the cache when its inputs and feature code are unchanged."""
    from auditflow.features import FEATURE_NAMES, GRAPH_FEATURE_NAMES, MODEL_STREAM_FEATURES, model_inputs
    from evidence_graph.gfp_features import gfp_feature_matrix
    from evidence_graph.graph_features import graph_feature_rows
    from model_service.scorer import feature_matrix
    from pipelines.features import compute_features

    name, events, ident = _events(source, seed, quick)
    key = hashlib.sha256(ident + b"\0" + _code_sha().encode()).hexdigest()[:16]
    cached = CACHE / f"{name}-{key}.pkl"
    if cached.exists():
        with cached.open("rb") as f:
            return pickle.load(f)
    t0 = time.perf_counter()
    rows = compute_features(events)
    ordered = [ev for ev, _ in rows]
    raw = feature_matrix([f for _, f in rows], FEATURE_NAMES)
    stream = feature_matrix([model_inputs(f) for _, f in rows], MODEL_STREAM_FEATURES)
    t1 = time.perf_counter()
    graph = feature_matrix(graph_feature_rows(ordered), GRAPH_FEATURE_NAMES)
    t2 = time.perf_counter()
    ref_names, reference = gfp_feature_matrix(ordered)
    t3 = time.perf_counter()
    out = Prepared(name, source, seed, ordered, raw, stream, graph, ref_names, reference,
                   {"stream": t1 - t0, "graph": t2 - t1, "gfp": t3 - t2})
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp")
    with tmp.open("wb") as f:
        pickle.dump(out, f, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(cached)
    return out
