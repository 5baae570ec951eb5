"""The model registry: every trained cascade recorded by content, with the feature schema and the
hash of the data it was trained on, in one JSON file (``registry.json`` beside the models).

Artefacts are content-addressed: each model file is also kept as ``artefacts/<sha256>.json``, and
an entry is keyed by the cascade digest (RFC 8785 hash of its manifest, which names both model
digests); recording the same cascade twice leaves one entry. Entries are sorted by digest, so the
same trainings give the same file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from auditflow.canonical import canonical_sha256

REGISTRY_FILE = "registry.json"
REGISTRY_SCHEMA = "auditflow.registry/1"
ARTEFACTS_DIR = "artefacts"


def feature_schema(cascade) -> dict[str, Any]:
    """What a model reads and how its reasons are worded, and the hash of all of it."""
    from auditflow.reasons import REASONS_VERSION

    body = {
        "stream_vector": list(cascade.stream_feature_names),
        "inputs": cascade.inputs,
        "stream_model_inputs": list(cascade.fast.feature_names),
        "graph_features": list(cascade.graph_feature_names) if cascade.deep is not None else [],
        "reasons": REASONS_VERSION,
    }
    return {**body, "sha256": canonical_sha256(body)}


def record(model_dir: str | Path, cascade, *, data_sha256: str, input_sha256: str | None = None,
           summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """Copy the cascade's model files by content and add (or refresh) its registry entry."""
    d = Path(model_dir)
    art = d / ARTEFACTS_DIR
    art.mkdir(parents=True, exist_ok=True)
    files = {}
    for stage, model in (("fast", cascade.fast), ("deep", cascade.deep)):
        if model is None:
            continue
        target = art / f"{model.digest}.json"
        if not target.exists():
            target.write_bytes(model.to_bytes())
        files[stage] = f"{ARTEFACTS_DIR}/{target.name}"
    entry = {
        "cascade_digest": cascade.digest,
        "stages": cascade.stages,
        "files": files,
        "feature_schema": feature_schema(cascade),
        "training_data_sha256": data_sha256,
        "input_sha256": input_sha256,
        "seed": cascade.seed,
        "summary": summary or {},
    }
    path = d / REGISTRY_FILE
    body = json.loads(path.read_text()) if path.exists() else {"schema": REGISTRY_SCHEMA, "entries": []}
    entries = {e["cascade_digest"]: e for e in body["entries"]}
    entries[cascade.digest] = entry
    body["entries"] = [entries[k] for k in sorted(entries)]
    path.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    return entry
