"""The narrator's route in the model service: ``auditflow serve model`` includes :data:`router`
(``POST /narrate``, see :func:`model_service.narrator.narration_router`). The model loads on the
first request, on ``AUDITFLOW_NARRATOR_DEVICE`` with ``AUDITFLOW_NARRATOR_THREADS``."""

from __future__ import annotations

from model_service.narrator import load_model, narration_router


def _load():
    from auditflow_app.settings import Settings

    s = Settings()
    return load_model(s.narrator_device, threads=s.narrator_threads)


router = narration_router(load=_load)
