"""The stream job's batch scorer against xgboost itself, on the saved cascade's model file."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xgboost

from auditflow.features import MODEL_STREAM_FEATURES, model_inputs
from model_service import feature_matrix, train_cascade
from model_service.fast_path import batch_scorer

from .conftest import GRAPH_DESCRIPTIONS, GRAPH_NAMES, SMALL, mule_graph_features


@pytest.fixture(scope="module")
def saved(planted, tmp_path_factory):
    cascade, _ = train_cascade(planted, mule_graph_features, GRAPH_NAMES, GRAPH_DESCRIPTIONS, seed=3,
                               fast_params=SMALL, deep_params=SMALL)
    d = tmp_path_factory.mktemp("cascade")
    cascade.save(d)
    return d, planted


def test_scores_are_xgboosts_own_on_the_saved_model(saved):
    d, planted = saved
    predict, threshold, digest, names = batch_scorer(str(d))
    manifest = json.loads((d / "cascade.json").read_text())
    assert (threshold, digest, list(names)) == (manifest["candidate_threshold"], manifest["digest"],
                                                manifest["stream_feature_names"])
    X = feature_matrix([f for _, f in planted[:700]], names)
    booster = xgboost.Booster(model_file=str(d / manifest["fast"]["file"]))
    # the model's inputs, assembled here: the stream vector less hour and format code, formats by name
    inputs = feature_matrix([model_inputs(f) for _, f in planted[:700]], MODEL_STREAM_FEATURES)
    want = booster.predict(xgboost.DMatrix(inputs, feature_names=list(MODEL_STREAM_FEATURES)))
    np.testing.assert_allclose(predict(X), want, rtol=0, atol=1e-7)


def test_a_tampered_model_file_is_refused(saved, tmp_path):
    d, _ = saved
    for f in d.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    fast = tmp_path / json.loads((d / "cascade.json").read_text())["fast"]["file"]
    fast.write_bytes(fast.read_bytes().replace(b'"0"', b'"1"', 1))
    with pytest.raises(ValueError, match="digest"):
        batch_scorer(str(tmp_path))
