"""The narrator's route in the model service: ``auditflow serve model`` includes
:func:`narrator_router` (``POST /narrate``, see :func:`model_service.narrator.narration_router`),
made with the narrator's device and threads the app layer passes. The model loads on the first
request."""

from __future__ import annotations

from model_service.narrator import load_model, narration_router


def narrator_router(device: str = "auto", *, threads: int | None = None):
    """``POST /narrate`` whose model loads on the first request, on ``device`` (``auto``, ``cpu``
    or ``cuda``) with ``threads`` torch CPU threads (None: torch's default)."""
    return narration_router(load=lambda: load_model(device, threads=threads))
