"""A telemetry batch as the ingest path holds it: its limits, the refusal of a whole batch, the
validated rows (``ParsedBatch``), and the checks of its id and contract version that come first."""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from apps.agents.contract import VERSIONS, UnknownContract, contract_version
from apps.telemetry import metrics
from apps.telemetry.choices import Stage

BATCH_ID = re.compile(r"^[A-Za-z0-9._:-]{8,64}$")


MAX_SAMPLES = 1000  # of each kind per batch


MAX_ERRORS = 50  # reported per rejected batch


INT32 = metrics.INT32


INT64 = metrics.INT64


STAGES = frozenset(Stage.values)


def max_future_skew_s() -> float:
    return float(getattr(settings, "TELEMETRY_MAX_FUTURE_SKEW_S", 30))


def raw_retention_hours() -> float:
    return float(getattr(settings, "TELEMETRY_RAW_RETENTION_HOURS", 48))


class BatchRejected(Exception):
    """The whole batch is refused: 400 (errors by path), 403 or 413. ``versions``: the
    contract versions this server speaks, when the batch's was not one of them."""

    def __init__(self, status: int, errors: dict[str, list[str]], *,
                 versions: tuple[int, ...] | None = None) -> None:
        self.status = status
        self.errors = errors
        self.versions = versions
        first = next(iter(errors.items()))
        super().__init__(f"{first[0]}: {first[1][0]}")


@dataclass
class ParsedBatch:
    batch_id: str
    contract: int = 1
    node_rows: list[tuple[Any, ...]] = field(default_factory=list)
    module_rows: list[tuple[Any, ...]] = field(default_factory=list)
    tier_rows: list[tuple[Any, ...]] = field(default_factory=list)
    stage_rows: list[tuple[Any, ...]] = field(default_factory=list)
    endpoint_rows: list[tuple[Any, ...]] = field(default_factory=list)  # from tier samples' ``endpoints``
    latency_rows: list[tuple[Any, ...]] = field(default_factory=list)  # (time, node, stage, offset, counts, n)
    holder_rows: list[tuple[Any, ...]] = field(default_factory=list)  # (time, node, holders as JSON text)
    min_time: dt.datetime | None = None
    max_time: dt.datetime | None = None

    def note_time(self, t: dt.datetime) -> None:
        if self.min_time is None or t < self.min_time:
            self.min_time = t
        if self.max_time is None or t > self.max_time:
            self.max_time = t


def holders_json(holders: list[dict[str, Any]]) -> str:
    """A node's holders as the stored JSON text (the writer casts it to jsonb)."""
    return json.dumps(holders, separators=(",", ":"))


def check_batch_id(payload: Any) -> str:
    if not isinstance(payload, dict):
        raise BatchRejected(400, {"non_field_errors": ["the batch must be a JSON object"]})
    batch_id = payload.get("batch_id")
    if not isinstance(batch_id, str) or not BATCH_ID.match(batch_id):
        raise BatchRejected(400, {"batch_id": ["is required: 8-64 characters of A-Z a-z 0-9 . _ : -"]})
    return batch_id


def check_contract(payload: dict[str, Any]) -> int:
    """The batch's contract version (1 without one); an unknown one is a 400 naming the versions spoken."""
    try:
        return contract_version(payload)
    except UnknownContract as exc:
        raise BatchRejected(400, {"contract": [str(exc)]}, versions=VERSIONS) from None
