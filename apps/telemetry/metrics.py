"""Every node and module metric, declared once.

A metric's declaration (name, type, range, unit, since which contract version
it may be null, its per-minute rollups) is the only place it is written down.
Everything else derives from ``NODE_METRICS`` and ``MODULE_METRICS``:

- the model fields of the raw samples, the latest status and the per-minute
  rollups (``contribute``; a new metric is one declaration and one
  ``makemigrations``);
- the complete check's field checks (``ingest.fields``), the compiled fast path's
  Structs (``ingest.decoder``) and the contract's nullable fields (``nullable_fields``);
- the COPY columns and types and the status upsert (``store.raw``);
- the rollup SQL (``rollups.rollup``);
- the ingest schema's serializers and the latest status the API answers
  (``api.serializers``), hence the OpenAPI schema. (The per-minute points a chart
  reads pick their aggregate per metric, in the series selectors.)

Tier and stage samples are not metrics of a node: their counters are summed
over windows and their latencies merged as histograms, each by its own rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from django.db import models

INT32 = 2**31 - 1
INT64 = 2**63 - 1

Aggregate = Literal["mean", "max", "min"]
_SQL = {"mean": "avg", "max": "max", "min": "min"}
_PG_MAX = {"int2": 2**15 - 1, "int4": INT32, "int8": INT64}
_INT_FIELDS: dict[str, type[models.Field[Any, Any]]] = {
    "int2": models.SmallIntegerField, "int4": models.IntegerField, "int8": models.BigIntegerField,
}


@dataclass(frozen=True)
class Metric:
    """One metric of a node sample or of a module in it.

    ``pg``: its PostgreSQL column type (``float8``, ``int2``, ``int4`` or ``int8``); an integer
    metric is bounded by its column when ``hi`` is not given. ``nullable_since``: the contract
    version from which an agent may send null (unknown; stored as null, never as zero).
    ``rollups``: the per-minute aggregates kept, each in column ``{name}_{aggregate}`` unless
    ``columns`` names another."""

    name: str
    pg: Literal["float8", "int2", "int4", "int8"]
    help: str = ""
    unit: str = ""
    lo: float | None = 0.0
    hi: float | None = None
    nullable_since: int | None = None
    rollups: tuple[Aggregate, ...] = ("mean", "max")
    columns: dict[str, str] = field(default_factory=dict)

    @property
    def is_int(self) -> bool:
        return self.pg != "float8"

    @property
    def nullable(self) -> bool:
        return self.nullable_since is not None

    @property
    def bounds(self) -> tuple[float | None, float | None]:
        """The range validation enforces: the declared one, an integer's within its column."""
        if self.is_int:
            return (self.lo if self.lo is not None else -_PG_MAX[self.pg],
                    self.hi if self.hi is not None else _PG_MAX[self.pg])
        return self.lo, self.hi

    def rollup_columns(self) -> list[tuple[str, str]]:
        """[(column, SQL aggregate)] of its per-minute rollup."""
        return [(self.columns.get(agg, f"{self.name}_{agg}"), _SQL[agg]) for agg in self.rollups]

    def model_field(self, aggregate: Aggregate | None = None) -> models.Field[Any, Any]:
        if not self.is_int or aggregate == "mean":
            return models.FloatField(null=self.nullable, blank=self.nullable)
        return _INT_FIELDS[self.pg](null=self.nullable, blank=self.nullable)


def _m(name: str, pg: Literal["float8", "int2", "int4", "int8"], **kw: Any) -> Metric:
    return Metric(name, pg, **kw)


NODE_METRICS: tuple[Metric, ...] = (
    _m("cpu_util", "float8", unit="fraction", help="CPU utilisation, fraction 0..1", hi=1.0),
    _m("mem_util", "float8", unit="fraction", help="Memory utilisation, fraction 0..1", hi=1.0),
    _m("load1", "float8", help="One-minute load average", rollups=("mean",)),
    _m("in_flight", "int4", unit="requests", help="Requests in flight on the node", nullable_since=2),
    _m("threads", "int4", unit="threads", help="Threads of the serving process", rollups=("max",)),
)

MODULE_METRICS: tuple[Metric, ...] = (
    _m("util", "float8", unit="fraction", help="Utilisation, fraction 0..1", hi=1.0, nullable_since=2),
    _m("temp_c", "float8", unit="°C", help="°C", lo=-60.0, hi=250.0, nullable_since=2),
    _m("power_w", "float8", unit="W", help="Watts", nullable_since=2),
    _m("link_width", "int2", unit="lanes", help="PCIe lanes trained", hi=32, nullable_since=2, rollups=("min",)),
    _m("link_width_expected", "int2", unit="lanes", help="PCIe lanes expected", hi=32, nullable_since=2,
       rollups=("max",), columns={"max": "link_width_expected"}),
    _m("ecc_corrected", "int8", help="Cumulative since boot", nullable_since=2, rollups=("max",)),
    _m("ecc_uncorrected", "int8", help="Cumulative since boot", nullable_since=2, rollups=("max",)),
    _m("errors", "int8", help="Cumulative since boot", nullable_since=2, rollups=("max",)),
)


# Since which contract version (``apps/agents/contract.py``) a node or module field may be null.
NULLABLE_SINCE: dict[str, int] = {
    m.name: m.nullable_since for m in (*NODE_METRICS, *MODULE_METRICS) if m.nullable_since is not None
}


def nullable_fields(version: int) -> frozenset[str]:
    """The node and module fields an agent speaking contract ``version`` may send as null."""
    return frozenset(name for name, since in NULLABLE_SINCE.items() if version >= since)


def names(metrics: tuple[Metric, ...]) -> tuple[str, ...]:
    return tuple(m.name for m in metrics)


def contribute(model: type[models.Model], metrics: tuple[Metric, ...], role: Literal["sample", "rollup"]) -> None:
    """Add the metrics' columns to ``model``: one per metric (a raw sample, a latest status) or one
    per rollup aggregate. Called right below the model's class statement."""
    for m in metrics:
        if role == "sample":
            model.add_to_class(m.name, m.model_field())
        else:
            for agg, (column, _sql) in zip(m.rollups, m.rollup_columns(), strict=True):
                model.add_to_class(column, m.model_field(agg))
