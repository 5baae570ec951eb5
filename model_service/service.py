"""The model service: batch scoring over HTTP (FastAPI) with micro-batching and priority tiers.

``POST /score`` takes ``{"tier": "critical"|"normal"|"background", "explain": "alerts"|"all"|"none",
"rows": [{"event_id", "stream": {...FEATURE_NAMES...}, "graph": {...}}]}`` and answers each row's
score, the stage that scored it (2 with graph features on a two-stage cascade, else 1), whether it
alerts, the deep-path tier its score asks for (:class:`TierPolicy`) and its top-4 adverse reason
codes (exact TreeSHAP, worded by :mod:`auditflow.reasons`; by default for alerting rows only).
A payload that does not validate gets 422 naming each field; an empty batch answers ``[]``.

Requests wait in one priority queue: ``critical`` before ``normal`` before ``background``, first
come first served within a tier. A worker takes up to ``batch_max`` rows (everything queued, highest
tier first, waiting ``batch_wait_ms`` for more after the first) and scores them in one call on a
thread (xgboost and the TreeSHAP kernel release the GIL). Per tier, Prometheus metrics at
``/metrics``: request latency (queue wait plus scoring), queue depth, rows scored and requests past
the tier's latency target. ``/health`` answers while the process is up; ``/ready`` once the model is
loaded and the worker runs (503 before).

The scorer runs on CUDA when xgboost has it (:func:`model_service.scorer.preferred_device`), else
on the CPU. The narrator, where installed, is hosted in the same service (:func:`hosted_routers`).
The service takes plain arguments; ``auditflow serve model`` (the app layer's model server)
builds them from the settings.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from auditflow.records import ReasonCode
from auditflow.tiers import TIERS  # the one severity scheme

_PRIORITY = {t: i for i, t in enumerate(TIERS)}
REASONS_PER_ROW = 4


@dataclass(frozen=True)
class TierPolicy:
    """Depth gated by risk: the deep-path tier of a score, and each tier's latency target."""

    critical_score: float
    normal_score: float
    alert_threshold: float
    targets_ms: Mapping[str, float]

    def tier(self, score: float) -> str:
        """``critical`` / ``normal`` / ``background`` (at or above the alert threshold), else ``none``.

        >>> TierPolicy(0.9, 0.5, 0.2, {}).tier(0.95), TierPolicy(0.9, 0.5, 0.2, {}).tier(0.3)
        ('critical', 'background')
        """
        if score >= self.critical_score:
            return "critical"
        if score >= self.normal_score:
            return "normal"
        return "background" if score >= self.alert_threshold else "none"


@dataclass(frozen=True)
class ScoredRow:
    event_id: str
    score: float
    stage: int
    alert: bool
    tier: str
    reasons: tuple[ReasonCode, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"event_id": self.event_id, "score": self.score, "stage": self.stage, "alert": self.alert,
                "tier": self.tier, "reasons": [r.to_dict() for r in self.reasons]}


class CascadeScorer:
    """Scores rows of stream (and graph) features with a cascade; the same rows give the same answer."""

    def __init__(self, cascade, policy: TierPolicy | None = None) -> None:
        self.cascade = cascade
        self.policy = policy or TierPolicy(0.9, 0.5, cascade.alert_threshold, {t: 1000.0 for t in TIERS})
        self.stream_names = tuple(cascade.stream_feature_names)
        self.graph_names = tuple(cascade.graph_feature_names) if cascade.deep is not None else ()
        cascade.alert_model.tree_ensemble()  # build the TreeSHAP arrays once, before traffic
        self._warm()

    def _warm(self) -> None:
        zero = {n: 0.0 for n in self.stream_names}
        self.score([("warm", zero, {n: 0.0 for n in self.graph_names} or None)], explain="all")

    def score(self, rows: Sequence[tuple[str, Mapping[str, float], Mapping[str, float] | None]],
              explain: str = "alerts") -> list[ScoredRow]:
        if not rows:
            return []
        c = self.cascade
        X = np.array([[s[n] for n in self.stream_names] for _, s, _ in rows], dtype=np.float64)
        scores = c.fast_score_batch(X)
        stages = np.ones(len(rows), dtype=np.int64)
        deep_rows = [i for i, (_, _, g) in enumerate(rows) if c.deep is not None and g is not None]
        deep_X = None
        if deep_rows:
            deep_X = np.array([c.deep_vector(rows[i][1], rows[i][2]) for i in deep_rows])
            scores[deep_rows] = c.deep.predict_proba(deep_X)
            stages[deep_rows] = 2
        alert = scores >= (c.alert_threshold if c.deep is None else -1.0)
        if c.deep is not None:  # two stages: only a stage-2 score alerts
            alert = (stages == 2) & (scores >= c.alert_threshold)
        reasons: dict[int, list[ReasonCode]] = {}
        if explain != "none":
            want = [i for i in range(len(rows)) if explain == "all" or alert[i]]
            one = [i for i in want if stages[i] == 1]
            two = [i for i in want if stages[i] == 2]
            if one:
                Xin = c.input_map.matrix(X[one])
                for i, codes in zip(one, c.fast.reason_codes_batch(Xin, k=REASONS_PER_ROW)):
                    reasons[i] = codes
            if two:
                pos = {r: j for j, r in enumerate(deep_rows)}
                for i, codes in zip(two, c.deep.reason_codes_batch(deep_X[[pos[i] for i in two]], k=REASONS_PER_ROW)):
                    reasons[i] = codes
        return [ScoredRow(rows[i][0], float(scores[i]), int(stages[i]), bool(alert[i]),
                          self.policy.tier(float(scores[i])) if alert[i] else "none", tuple(reasons.get(i, ())))
                for i in range(len(rows))]


class Row(BaseModel):
    """One row to score: the stream feature vector by name, and graph features for stage 2."""

    model_config = ConfigDict(extra="forbid")
    event_id: str = Field(min_length=1, max_length=200)
    stream: dict[str, float]
    graph: dict[str, float] | None = None


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tier: Literal["critical", "normal", "background"] = "normal"
    explain: Literal["alerts", "all", "none"] = "alerts"
    rows: list[Row] = Field(max_length=100_000)


class TierMetrics:
    """Per tier, in a registry of their own: latency from queueing (a histogram named
    ``{prefix}_{latency[0]}``), work done (``{prefix}_{done[0]}``), how many were past the tier's
    latency target and the queue depth; used by the service (requests) and the deep path (alerts).
    Every tier's series exists from the start, zero until used."""

    def __init__(self, prefix: str, *, latency: tuple[str, str], done: tuple[str, str], waiting: str, missed: str,
                 buckets: Sequence[float]) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.latency = Histogram(f"{prefix}_{latency[0]}", latency[1], ["tier"], registry=self.registry,
                                 buckets=tuple(buckets))
        self.depth = Gauge(f"{prefix}_queue_depth", waiting, ["tier"], registry=self.registry)
        self.done = Counter(f"{prefix}_{done[0]}", done[1], ["tier"], registry=self.registry)
        self.missed = Counter(f"{prefix}_latency_target_missed", missed, ["tier"], registry=self.registry)
        for t in TIERS:
            for m in (self.latency, self.depth, self.done, self.missed):
                m.labels(t)

    def served(self, tier: str, seconds: float, count: int, target_ms: float) -> None:
        """``count`` done in ``tier``, ``seconds`` after they were queued."""
        self.latency.labels(tier).observe(seconds)
        self.done.labels(tier).inc(count)
        if seconds * 1000.0 > target_ms:
            self.missed.labels(tier).inc()


class _Metrics(TierMetrics):
    """The service's: requests, from queued to scored."""

    def __init__(self) -> None:
        super().__init__("auditflow_model", latency=("request_seconds", "request latency: queue wait plus scoring"),
                         done=("rows_scored", "rows scored"), waiting="requests waiting",
                         missed="requests past their tier's target",
                         buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0))


@dataclass
class _Job:
    tier: str
    rows: list
    explain: str
    future: asyncio.Future
    enqueued: float


class MicroBatcher:
    """The priority queue and its worker (one asyncio task; scoring on a thread)."""

    def __init__(self, scorer: CascadeScorer, metrics: _Metrics, *, batch_max: int, batch_wait_ms: float,
                 targets_ms: Mapping[str, float]) -> None:
        self.scorer = scorer
        self.metrics = metrics
        self.batch_max = batch_max
        self.batch_wait = batch_wait_ms / 1000.0
        self.targets_ms = dict(targets_ms)
        self.queue: asyncio.PriorityQueue | None = None
        self.task: asyncio.Task | None = None
        self._seq = itertools.count()
        self.served: list[str] = []  # tiers in the order their requests were scored (tests, bench)
        self.paused: asyncio.Event | None = None

    def start(self) -> None:
        self.queue = asyncio.PriorityQueue()
        self.paused = asyncio.Event()
        self.paused.set()
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
            self.task = None

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    async def submit(self, tier: str, rows: list, explain: str) -> list[ScoredRow]:
        if not rows:
            return []
        job = _Job(tier, rows, explain, asyncio.get_running_loop().create_future(), time.perf_counter())
        self.metrics.depth.labels(tier).inc()
        await self.queue.put((_PRIORITY[tier], next(self._seq), job))
        return await job.future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self.paused.wait()
            first = await self.queue.get()
            jobs = [first[2]]
            n = len(first[2].rows)
            deadline = loop.time() + self.batch_wait
            while n < self.batch_max:
                try:
                    item = self.queue.get_nowait()
                except asyncio.QueueEmpty:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    try:
                        item = await asyncio.wait_for(self.queue.get(), remaining)
                    except TimeoutError:
                        break
                if n + len(item[2].rows) > self.batch_max and n > 0:
                    await self.queue.put(item)  # keeps its place: same priority and sequence
                    break
                jobs.append(item[2])
                n += len(item[2].rows)
            for job in jobs:
                self.metrics.depth.labels(job.tier).dec()
                self.served.append(job.tier)
            try:
                results = await loop.run_in_executor(None, self._score, jobs)
            except Exception as e:  # noqa: BLE001 - every waiting request gets the error
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(e)
                continue
            now = time.perf_counter()
            for job, res in zip(jobs, results):
                self.metrics.served(job.tier, now - job.enqueued, len(job.rows),
                                    self.targets_ms.get(job.tier, float("inf")))
                if not job.future.done():
                    job.future.set_result(res)

    def _score(self, jobs: list[_Job]) -> list[list[ScoredRow]]:
        # one scoring call per explain mode, rows of all jobs together
        out: list[list[ScoredRow] | None] = [None] * len(jobs)
        for mode in ("none", "alerts", "all"):
            idx = [i for i, j in enumerate(jobs) if j.explain == mode]
            if not idx:
                continue
            rows = [r for i in idx for r in jobs[i].rows]
            scored = self.scorer.score(rows, explain=mode)
            pos = 0
            for i in idx:
                k = len(jobs[i].rows)
                out[i] = scored[pos:pos + k]
                pos += k
        return out  # type: ignore[return-value]


def hosted_routers(*, narrator_device: str = "auto", narrator_threads: int | None = None) -> list:
    """The routers the service hosts besides scoring, where installed: the narrator's
    (``POST /narrate``, its model loaded on the first request on ``narrator_device`` with
    ``narrator_threads`` torch CPU threads; see :mod:`model_service.narrator_service`)."""
    try:
        from model_service.narrator_service import narrator_router
    except ImportError:
        return []
    return [narrator_router(narrator_device, threads=narrator_threads)]


def create_app(scorer: CascadeScorer, *, batch_max: int = 512, batch_wait_ms: float = 2.0,
               targets_ms: Mapping[str, float] | None = None, routers: Sequence | None = None):
    """The FastAPI app around ``scorer`` (see the module docstring), with ``routers`` included
    (default: :func:`hosted_routers` as they come)."""
    from contextlib import asynccontextmanager

    from fastapi import FastAPI, HTTPException, Response

    metrics = _Metrics()
    targets = dict(targets_ms or scorer.policy.targets_ms)
    batcher = MicroBatcher(scorer, metrics, batch_max=batch_max, batch_wait_ms=batch_wait_ms, targets_ms=targets)
    stream_names = scorer.stream_names
    graph_names = scorer.graph_names

    @asynccontextmanager
    async def lifespan(_app):
        batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title="auditflow model service", lifespan=lifespan)
    app.state.batcher = batcher
    app.state.metrics = metrics

    def field_errors(req: ScoreRequest) -> list[dict[str, Any]]:
        errors = []
        for i, row in enumerate(req.rows):
            missing = [n for n in stream_names if n not in row.stream]
            extra = sorted(set(row.stream) - set(stream_names))
            if missing:
                errors.append({"loc": ["body", "rows", i, "stream"], "type": "missing_features",
                               "msg": f"missing stream features: {missing[:10]}{' ...' if len(missing) > 10 else ''}"})
            if extra:
                errors.append({"loc": ["body", "rows", i, "stream"], "type": "unknown_features",
                               "msg": f"unknown stream features: {extra[:10]}"})
            if row.graph is not None and graph_names:
                gm = [n for n in graph_names if n not in row.graph]
                if gm:
                    errors.append({"loc": ["body", "rows", i, "graph"], "type": "missing_features",
                                   "msg": f"missing graph features: {gm[:10]}"})
            # math.isinf: np.isinf on each Python float took a quarter of a 100-row request
            bad = [k for k, v in {**row.stream, **(row.graph or {})}.items() if math.isinf(v)]
            if bad:
                errors.append({"loc": ["body", "rows", i], "type": "infinite",
                               "msg": f"infinite values (use null for missing): {bad[:10]}"})
        return errors

    @app.post("/score")
    async def score(req: ScoreRequest) -> dict[str, Any]:
        errors = field_errors(req)
        if errors:
            raise HTTPException(status_code=422, detail=errors)
        rows = [(r.event_id, r.stream, r.graph) for r in req.rows]
        scored = await batcher.submit(req.tier, rows, req.explain)
        return {"model_digest": scorer.cascade.digest, "rows": [s.to_dict() for s in scored]}

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/ready")
    async def ready() -> Response:
        if batcher.running:
            return Response('{"status":"ready"}', media_type="application/json")
        return Response('{"status":"starting"}', status_code=503, media_type="application/json")

    @app.get("/metrics")
    async def prometheus() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    for router in hosted_routers() if routers is None else routers:  # the narrator, hosted here
        app.include_router(router)
    return app
