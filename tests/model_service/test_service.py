"""The model service: validation (422 naming fields), the empty batch, scores and reason codes as
the cascade computes them, health/readiness, Prometheus metrics per tier, and tier ordering under a
burst (critical before normal before background, first come first served within a tier)."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
import xgboost as xgb
from fastapi.testclient import TestClient

from auditflow.features import MODEL_STREAM_FEATURES, model_inputs
from model_service import train_cascade
from model_service.service import TIERS, CascadeScorer, MicroBatcher, TierPolicy, _Metrics, create_app

from .conftest import GRAPH_DESCRIPTIONS, GRAPH_NAMES, SMALL, mule_graph_features


@pytest.fixture(scope="module")
def cascade(planted):
    c, _ = train_cascade(planted, mule_graph_features, GRAPH_NAMES, GRAPH_DESCRIPTIONS, seed=3,
                         fast_params=SMALL, deep_params=SMALL)
    assert c.stages == 2  # the planted graph feature makes stage 2 worth keeping
    return c


@pytest.fixture(scope="module")
def scorer(cascade):
    return CascadeScorer(cascade, TierPolicy(0.9, 0.5, cascade.alert_threshold,
                                             {"critical": 100.0, "normal": 1000.0, "background": 10_000.0}))


@pytest.fixture(scope="module")
def client(scorer):
    with TestClient(create_app(scorer, batch_max=64, batch_wait_ms=1.0)) as c:
        yield c


def payload(rows, **kw):
    return {"rows": [{"event_id": ev.event_id, "stream": f, "graph": mule_graph_features(ev)} for ev, f in rows], **kw}


def test_empty_batch_and_health(client):
    r = client.post("/score", json={"rows": []})
    assert r.status_code == 200 and r.json()["rows"] == []
    assert client.get("/health").json() == {"status": "ok"}
    assert client.get("/ready").status_code == 200


def test_not_ready_before_the_worker_runs(scorer):
    app = create_app(scorer)
    client = TestClient(app)  # no context manager: the lifespan (the worker) has not started
    assert client.get("/ready").status_code == 503
    assert client.get("/health").status_code == 200


def test_bad_payloads_get_422_naming_the_field(client, planted):
    ev, f = planted[0]
    missing = dict(f)
    del missing["snd_out_n_1h"]
    r = client.post("/score", json={"rows": [{"event_id": "a", "stream": f}, {"event_id": "b", "stream": missing}]})
    assert r.status_code == 422
    (err,) = r.json()["detail"]
    assert err["loc"] == ["body", "rows", 1, "stream"] and "snd_out_n_1h" in err["msg"]
    r = client.post("/score", json={"rows": [{"event_id": "a", "stream": {**f, "amount_usd": "lots"}}]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "rows", 0, "stream", "amount_usd"]
    r = client.post("/score", json={"tier": "urgent", "rows": []})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "tier"]
    r = client.post("/score", json={"rows": [{"stream": f}]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "rows", 0, "event_id"]
    r = client.post("/score", json={"rows": [{"event_id": "a", "stream": f, "graph": {"g_mule": 1.0}}]})
    assert r.status_code == 422 and "g_dummy" in r.json()["detail"][0]["msg"]
    r = client.post("/score", json={"rows": [{"event_id": "a", "stream": {**f, "colour": 1.0}}]})
    assert r.status_code == 422 and "colour" in r.json()["detail"][0]["msg"]
    # JSON has no infinity, but Python's encoder writes one and the parser reads it back
    body = '{"rows": [{"event_id": "a", "stream": {%s}}]}' % ", ".join(
        f'"{k}": {"-Infinity" if k == "snd_gap_min" else json.dumps(v)}' for k, v in f.items())
    r = client.post("/score", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422
    (err,) = r.json()["detail"]
    assert err["loc"] == ["body", "rows", 0] and err["type"] == "infinite" and "snd_gap_min" in err["msg"]


def test_scores_and_reasons_are_the_models_own(client, cascade, planted):
    rows = planted[-300:]
    got = client.post("/score", json=payload(rows)).json()
    assert got["model_digest"] == cascade.digest
    # reference, assembled here: model inputs by hand, xgboost's own predict and pred_contribs
    names = [*MODEL_STREAM_FEATURES, *GRAPH_NAMES]
    X = np.array([[model_inputs(f)[n] for n in MODEL_STREAM_FEATURES] + [mule_graph_features(ev)[n] for n in GRAPH_NAMES]
                  for ev, f in rows], dtype=np.float32)
    dm = xgb.DMatrix(X, feature_names=names)
    want = cascade.deep.booster.predict(dm)
    contribs = cascade.deep.booster.predict(dm, pred_contribs=True)[:, :-1]
    assert [r["event_id"] for r in got["rows"]] == [ev.event_id for ev, _ in rows]
    assert np.allclose([r["score"] for r in got["rows"]], want, atol=1e-6)
    alerts = [r for r in got["rows"] if r["alert"]]
    assert alerts and all(r["stage"] == 2 for r in got["rows"])
    for i, r in enumerate(got["rows"]):
        assert r["alert"] == (want[i] >= cascade.alert_threshold)
        if not r["alert"]:
            assert r["reasons"] == [] and r["tier"] == "none"
            continue
        assert r["tier"] == ("critical" if want[i] >= 0.9 else "normal" if want[i] >= 0.5 else "background")
        c = contribs[i]
        top = sorted((j for j in range(len(names)) if c[j] > 0), key=lambda j: -c[j])[:4]
        assert [x["feature"] for x in r["reasons"]] == [names[j] for j in top]
        assert [x["contribution"] for x in r["reasons"]] == pytest.approx([float(c[j]) for j in top], abs=1e-4)
    # the same request, the same answer (reason codes and their text included)
    assert client.post("/score", json=payload(rows)).json() == got


def test_without_graph_features_stage_one_scores(client, cascade, planted):
    rows = planted[:50]
    body = {"explain": "all", "rows": [{"event_id": ev.event_id, "stream": f} for ev, f in rows]}
    got = client.post("/score", json=body).json()["rows"]
    X = np.array([[model_inputs(f)[n] for n in MODEL_STREAM_FEATURES] for _, f in rows], dtype=np.float32)
    want = cascade.fast.booster.predict(xgb.DMatrix(X, feature_names=list(MODEL_STREAM_FEATURES)))
    assert np.allclose([r["score"] for r in got], want, atol=1e-6)
    assert all(r["stage"] == 1 and not r["alert"] and len(r["reasons"]) <= 4 for r in got)
    assert any(r["reasons"] for r in got)  # explain=all explains rows that do not alert too


def test_metrics_per_tier(client, planted):
    client.post("/score", json=payload(planted[:5], tier="critical"))
    text = client.get("/metrics").text
    for tier in TIERS:
        assert f'auditflow_model_queue_depth{{tier="{tier}"}} 0.0' in text
    assert 'auditflow_model_request_seconds_count{tier="critical"}' in text
    assert 'auditflow_model_rows_scored_total{tier="critical"}' in text


def test_tier_ordering_under_a_burst(scorer, planted):
    """A burst arrives while the worker is busy (paused): every critical request is served before
    any normal one, normal before background, and within a tier in arrival order."""
    rows = [(ev.event_id, f, mule_graph_features(ev)) for ev, f in planted[:40]]
    arrivals = [TIERS[(7 * i) % 3] for i in range(30)]  # interleaved tiers

    async def burst():
        metrics = _Metrics()
        b = MicroBatcher(scorer, metrics, batch_max=2, batch_wait_ms=0.0, targets_ms={})
        b.start()
        b.paused.clear()
        await asyncio.sleep(0)
        tasks = []
        for i, tier in enumerate(arrivals):
            tasks.append(asyncio.create_task(b.submit(tier, [rows[i]], "none")))
            await asyncio.sleep(0)  # each request reaches the queue in arrival order
        for _ in range(5):
            await asyncio.sleep(0)
        depth = {t: metrics.depth.labels(t)._value.get() for t in TIERS}
        b.paused.set()
        results = await asyncio.gather(*tasks)
        await b.stop()
        return b.served, depth, results

    served, depth, results = asyncio.run(burst())
    # The first request may have been taken before the pause took effect; the rest wait.
    waiting = {t: arrivals.count(t) for t in TIERS}
    if sum(depth.values()) == len(arrivals) - 1:
        waiting[served[0]] -= 1
        served = served[1:]
    assert depth == waiting
    assert served == sorted(served, key=TIERS.index)  # critical, then normal, then background
    assert [r[0].event_id for r in results] == [rows[i][0] for i in range(30)]  # each got its own row


def test_serve_model_wires_the_settings_into_the_service(cascade, tmp_path, monkeypatch):
    """``auditflow serve model`` (auditflow_app.model_server): the cascade saved in the settings'
    model folder, their tiers and batching, the narrator on their device and threads."""
    from auditflow_app import model_server
    from auditflow_app.settings import Settings
    from model_service import service

    cascade.save(tmp_path / "model")
    hosted = []
    monkeypatch.setattr(service, "hosted_routers", lambda **kw: hosted.append(kw) or [])
    settings = Settings(out_dir=tmp_path, model_batch_max=17, model_batch_wait_ms=3.5, tier_critical_score=0.8,
                        tier_normal_score=0.4, tier_critical_ms=50.0, tier_normal_ms=500.0, tier_background_ms=5000.0,
                        narrator_device="cpu", narrator_threads=3)
    app = model_server.model_app(settings)  # model_dir unset: OUT_DIR/model
    batcher = app.state.batcher
    assert (batcher.batch_max, batcher.batch_wait) == (17, 0.0035)
    assert batcher.targets_ms == {"critical": 50.0, "normal": 500.0, "background": 5000.0}
    policy = batcher.scorer.policy
    assert (policy.critical_score, policy.normal_score) == (0.8, 0.4)
    assert policy.alert_threshold == cascade.alert_threshold and batcher.scorer.cascade.digest == cascade.digest
    assert hosted == [{"narrator_device": "cpu", "narrator_threads": 3}]
    with pytest.raises((OSError, ValueError)):
        model_server.model_app(Settings(out_dir=tmp_path / "nothing"))
