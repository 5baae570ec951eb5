"""Same seed -> same bytes, end to end: generated data, stream features, graph features, both
models, both thresholds and the cascade digest do not depend on the interpreter's string hash
seed, on set or dict iteration order, or on xgboost's thread count.

Each run is a separate interpreter (``PYTHONHASHSEED`` only takes effect at start-up) that
generates a small history with :func:`ingest.synthetic.generate`, writes it as CSV, and trains
the cascade through :func:`auditflow_app.flow.train`, exactly as ``auditflow demo`` does. The two runs
also use different xgboost thread counts (1 and 3).

Note: the cascade digest covers the model bytes, which carry the hyperparameters, so a change of
``FAST_PARAMS``/``DEEP_PARAMS`` or of the stream features changes the digest and the metrics:
compare digests, not just metrics, when two runs disagree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Runs in a fresh interpreter: argv = out_dir, xgboost threads.
CHILD = r"""
import hashlib, json, os, sys
from pathlib import Path

threads = int(sys.argv[2])
os.cpu_count = lambda: threads  # BoosterParams' default nthread is min(4, os.cpu_count())

from auditflow_app import flow
from auditflow_app.settings import Settings
from ingest.synthetic import generate, write_dataset
from model_service import FAST_PARAMS

assert FAST_PARAMS.nthread == min(4, threads)
out = Path(sys.argv[1])
ds = generate(accounts=400, days=4, laundering_rate=0.02, seed=7)
csv, patterns = write_dataset(ds, out / "data", name="history")
report = flow.train(csv, out / "model", Settings(out_dir=out, seed=7))
sha = lambda p: hashlib.sha256(Path(p).read_bytes()).hexdigest()
print(json.dumps({
    "data": [sha(csv), sha(patterns)],
    "models": {p.name: sha(p) for p in sorted((out / "model").glob("*.json")) if p.name != "training_timings.json"},  # wall clock only,
    "cascade_digest": report["cascade_digest"],
    "thresholds": [report["candidate_threshold"], report["alert_threshold"]],
    "metrics": [report["cascade_test"], report["fast_only_test"], report["stage1"]],
}, sort_keys=True))
"""


def _train_in_child(out: Path, hash_seed: str, threads: int) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(out), str(threads)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_training_is_byte_identical_across_processes_hash_seeds_and_threads(tmp_path):
    a = _train_in_child(tmp_path / "a", "1", threads=1)
    b = _train_in_child(tmp_path / "b", "2024", threads=3)
    assert a["data"] == b["data"]
    assert a["models"] == b["models"]
    assert a["thresholds"] == b["thresholds"]
    assert a["metrics"] == b["metrics"]
    assert a["cascade_digest"] == b["cascade_digest"]
    assert a["metrics"][0]["positives"] > 0  # the small set still exercises both stages
