"""The answers of the ingest endpoint, shared by the DRF view and the lean ASGI path,
so both say the same thing in the same shape."""

from __future__ import annotations

from typing import Any

from apps.common.errors import _summary
from apps.telemetry.batch import BatchRejected
from apps.telemetry.store.buffer import IngestResult


def rejection(exc: BatchRejected) -> tuple[int, dict[str, Any]]:
    """400: every problem by path (the API's usual error shape); 403 and 413 likewise. A contract
    version this server does not speak: 400 listing the versions it does (``contract_versions``)."""
    if exc.versions is not None:
        detail = "; ".join(f"{path}: {m}" for path, messages in exc.errors.items() for m in messages)
        return exc.status, {"detail": detail, "errors": exc.errors, "contract_versions": list(exc.versions)}
    if exc.status == 400:
        return 400, {"detail": _summary(exc.errors), "errors": exc.errors}
    parts = [f"{path}: {m}" for path, messages in exc.errors.items() for m in messages]
    return exc.status, {"detail": "; ".join(parts[:5]), "errors": exc.errors}


def accepted(result: IngestResult) -> tuple[int, dict[str, Any]]:
    """202 for a new batch, 200 for a batch id already taken (nothing written)."""
    return (200 if result.duplicate else 202), result.as_dict()
