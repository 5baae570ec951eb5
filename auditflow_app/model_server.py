"""The model service as ``auditflow serve model`` runs it: :mod:`model_service.service` wired from
the settings (the cascade's folder, the tiers, the micro-batching, the narrator's device)."""

from __future__ import annotations

from typing import Any

from auditflow_app.flow import MODEL_DIRNAME, tier_policy
from auditflow_app.settings import Settings


def model_app(settings: Settings) -> Any:
    """The FastAPI app of ``auditflow serve model``: the cascade in ``AUDITFLOW_MODEL_DIR`` (else
    OUT_DIR/model) with the tiers and batching of the settings, hosting the narrator on
    ``AUDITFLOW_NARRATOR_DEVICE`` with ``AUDITFLOW_NARRATOR_THREADS``. ``OSError``/``ValueError``
    if the cascade cannot be loaded."""
    from model_service.service import CascadeScorer, create_app, hosted_routers
    from model_service.training import Cascade

    cascade = Cascade.load(settings.model_dir or settings.out_dir / MODEL_DIRNAME)
    policy = tier_policy(settings, cascade.alert_threshold)
    routers = hosted_routers(narrator_device=settings.narrator_device, narrator_threads=settings.narrator_threads)
    return create_app(
        CascadeScorer(cascade, policy),
        batch_max=settings.model_batch_max,
        batch_wait_ms=settings.model_batch_wait_ms,
        targets_ms=dict(policy.targets_ms),
        routers=routers,
    )
