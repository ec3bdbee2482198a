"""API shapes. The ingest serializers describe the batch for the OpenAPI
schema; the batch itself is validated by ``apps.telemetry.ingest.validation`` (fast,
whole-batch, errors by path)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework import serializers

from apps.common.serializers import ErrorSerializer
from apps.inventory.choices import TierKind
from apps.telemetry import metrics, sketch
from apps.telemetry.choices import Stage

# ---- ingest (schema) --------------------------------------------------------------------------


def _metric_field(m: metrics.Metric) -> serializers.Field:  # type: ignore[type-arg]
    """A declared metric in the ingest schema: its type, declared range, unit and nullability."""
    kw: dict[str, Any] = {k: (int(v) if float(v).is_integer() else v)
                          for k, v in (("min_value", m.lo), ("max_value", m.hi)) if v is not None}
    help_text = m.help + (f" ({m.unit})" if m.unit and m.unit.lower() not in m.help.lower() else "")
    if m.nullable:
        kw["allow_null"] = True
        help_text += f"; null (contract {m.nullable_since}) when the agent does not know"
    cls = serializers.IntegerField if m.is_int else serializers.FloatField
    return cls(help_text=help_text.lstrip("; "), **kw)


def _sample_serializer(name: str, fields: dict[str, Any], declared: tuple[metrics.Metric, ...],
                       after: Callable[[], dict[str, Any]] | None = None
                       ) -> type[serializers.Serializer]:  # type: ignore[type-arg]
    """An ingest schema serializer with the declared metrics between ``fields`` and the fields
    ``after`` makes (made after them: DRF orders fields by when they were made)."""
    ns = {"__module__": __name__, **fields, **{m.name: _metric_field(m) for m in declared}}
    ns.update(after() if after else {})
    return serializers.SerializerMetaclass(name, (serializers.Serializer,), ns)  # type: ignore[return-value]


ModuleSampleIn = _sample_serializer("ModuleSampleIn", {"serial": serializers.CharField()}, metrics.MODULE_METRICS)


class HistogramIn(serializers.Serializer):
    offset = serializers.IntegerField(min_value=sketch.MIN_INDEX, max_value=sketch.MAX_INDEX,
                                      help_text="Bucket index of counts[0]")
    counts = serializers.ListField(child=serializers.IntegerField(min_value=0), min_length=1,
                                   max_length=sketch.MAX_BUCKETS,
                                   help_text="counts[k]: latencies in bucket offset + k, bucket i holding "
                                             "(gamma^(i-1), gamma^i] ms, gamma = 1.01 / 0.99")


NodeSampleIn = _sample_serializer(
    "NodeSampleIn",
    {"time": serializers.DateTimeField(),
     "node": serializers.CharField(help_text="Hostname; must be the key's own node")},
    metrics.NODE_METRICS,
    lambda: {"modules": ModuleSampleIn(many=True, required=False),
             "latency": serializers.DictField(child=HistogramIn(), required=False, allow_null=True,
                                              help_text="Contract 3: per stage, a log-bucket histogram of the "
                                                        "latencies of the requests the node served since its "
                                                        "previous sample")},
)


class EndpointFiguresIn(serializers.Serializer):
    endpoint = serializers.CharField(help_text="The external endpoint's name; an endpoint of the sample's tier")
    requests = serializers.IntegerField(min_value=0, help_text="Requests sent to it in the window")
    errors = serializers.IntegerField(min_value=0,  # type: ignore[assignment]
                                      help_text="Of those, the ones that failed (at most requests)")
    tokens = serializers.IntegerField(min_value=0, help_text="Tokens counted against its quota (input + output)")
    p95_ms = serializers.FloatField(min_value=0, allow_null=True,
                                    help_text="Latency p95 of its requests in the window, ms; null when none")


class TierSampleIn(serializers.Serializer):
    time = serializers.DateTimeField()
    tier = serializers.ChoiceField(choices=TierKind.choices)
    window_s = serializers.FloatField(help_text="Seconds the counts cover")
    queue_depth = serializers.IntegerField(min_value=0)
    arrivals = serializers.IntegerField(min_value=0)
    completions = serializers.IntegerField(min_value=0)
    input_tokens = serializers.IntegerField(min_value=0, required=False)
    output_tokens = serializers.IntegerField(min_value=0, required=False)
    endpoints = EndpointFiguresIn(many=True, required=False,
                                  help_text="Contract 3: the gateway's figures per external endpoint of the tier")


class StageSampleIn(serializers.Serializer):
    time = serializers.DateTimeField()
    tier = serializers.ChoiceField(choices=TierKind.choices)
    stage = serializers.ChoiceField(choices=Stage.choices)
    window_s = serializers.FloatField()
    count = serializers.IntegerField(min_value=0)
    p50_ms = serializers.FloatField(min_value=0)
    p95_ms = serializers.FloatField(min_value=0)
    p99_ms = serializers.FloatField(min_value=0)
    max_ms = serializers.FloatField(min_value=0)


class TelemetryBatchIn(serializers.Serializer):
    contract = serializers.IntegerField(required=False, help_text="Wire contract version (docs/agent-protocol.md); "
                                        "absent = 1. An unknown version is refused with the versions spoken")
    batch_id = serializers.RegexField(r"^[A-Za-z0-9._:-]{8,64}$", help_text="Resending a stored id writes nothing")
    node_samples = NodeSampleIn(many=True, required=False, help_text="Node keys only; at most 1000")
    tier_samples = TierSampleIn(many=True, required=False, help_text="The gateway key only; at most 1000")
    stage_samples = StageSampleIn(many=True, required=False, help_text="The gateway key only; at most 1000")


class AcceptedCounts(serializers.Serializer):
    node_samples = serializers.IntegerField()
    module_samples = serializers.IntegerField()
    tier_samples = serializers.IntegerField()
    stage_samples = serializers.IntegerField()


class IngestResultSerializer(serializers.Serializer):
    batch_id = serializers.CharField()
    duplicate = serializers.BooleanField()
    accepted = AcceptedCounts()


class TelemetryRejectionSerializer(ErrorSerializer):
    """A refused batch: every problem by path, and the contract versions spoken when the batch's is not one."""

    contract_versions = serializers.ListField(child=serializers.IntegerField(), required=False)


# ---- fleet (response shapes) --------------------------------------------------------------------


EXACT_HELP = ("true: from the nodes' latency histograms, each percentile within 1 % of the exact one over "
              "every latency of the range; false: merged from the gateway's per-window summaries (p50 their "
              "count-weighted mean, p95/p99/max the worst minute), an approximation")


class StageSummary(serializers.Serializer):
    stage = serializers.ChoiceField(choices=Stage.choices)
    count = serializers.IntegerField()
    p50_ms = serializers.FloatField(allow_null=True)
    p95_ms = serializers.FloatField(allow_null=True)
    p99_ms = serializers.FloatField(allow_null=True)
    max_ms = serializers.FloatField(allow_null=True)
    exact = serializers.BooleanField(default=False, help_text=EXACT_HELP)


class StageLatest(serializers.Serializer):
    stage = serializers.ChoiceField(choices=Stage.choices)
    count = serializers.IntegerField()
    p50_ms = serializers.FloatField(allow_null=True)
    p95_ms = serializers.FloatField(allow_null=True)
    p99_ms = serializers.FloatField(allow_null=True)


class TierWindow(serializers.Serializer):
    minutes = serializers.IntegerField()
    since = serializers.DateTimeField(help_text="Start of the window; the default 15 minutes end at the last "
                                                "rollup run (at most about two minutes ago)")
    cpu_util_mean = serializers.FloatField(allow_null=True, required=False,
                                           help_text="Mean over the node-minutes of the window")
    cpu_util_p95 = serializers.FloatField(allow_null=True, required=False)
    module_util_mean = serializers.FloatField(allow_null=True, required=False)
    module_util_p95 = serializers.FloatField(allow_null=True, required=False)
    queue_depth_mean = serializers.FloatField(allow_null=True, required=False)
    queue_depth_max = serializers.IntegerField(allow_null=True, required=False)
    requests_per_s = serializers.FloatField(allow_null=True, required=False)
    completions_per_s = serializers.FloatField(allow_null=True, required=False)
    input_tokens_per_s = serializers.FloatField(allow_null=True, required=False)
    output_tokens_per_s = serializers.FloatField(allow_null=True, required=False)
    stages = StageSummary(many=True)


class TierSnapshot(serializers.Serializer):
    """One tier of the fleet snapshot; docs/telemetry.md defines each figure."""

    id = serializers.IntegerField()
    kind = serializers.CharField(help_text="The tier's kind, as in ?tier=")
    name = serializers.CharField()
    level = serializers.IntegerField()
    min_active = serializers.IntegerField()
    max_active = serializers.IntegerField()
    by_state = serializers.DictField(child=serializers.IntegerField(), help_text="Nodes per state")
    total = serializers.IntegerField(help_text="Nodes not retired")
    standby = serializers.IntegerField()
    active = serializers.IntegerField(help_text="Nodes taking new work: the tier's capacity")
    cordoned = serializers.IntegerField()
    draining = serializers.IntegerField()
    drained = serializers.IntegerField()
    maintenance = serializers.IntegerField()
    unreachable = serializers.IntegerField()
    failed = serializers.IntegerField()
    held = serializers.IntegerField(help_text="cordoned + draining + drained")
    out = serializers.IntegerField(help_text="unreachable + failed")
    reporting = serializers.IntegerField(help_text="Nodes (not retired) whose latest report is fresh")
    serving = serializers.IntegerField(help_text="active + cordoned + draining: nodes still doing work")
    cpu_util = serializers.FloatField(allow_null=True, help_text="Mean CPU of the active nodes reporting, 0-1")
    busy_nodes = serializers.FloatField(allow_null=True, help_text="The serving nodes' CPU work in "
                                        "node-equivalents (their mean CPU × their count)")
    serving_modules = serializers.IntegerField(help_text="Healthy or degraded modules on active nodes")
    module_util = serializers.FloatField(allow_null=True, help_text="Mean utilisation of the serving modules "
                                         "reporting, 0-1")
    busy_modules = serializers.FloatField(allow_null=True, help_text="The serving nodes' module work in "
                                          "module-equivalents")
    in_flight = serializers.IntegerField(allow_null=True, help_text="Requests in flight on the reporting nodes")
    queue_depth = serializers.IntegerField(allow_null=True, help_text="The gateway's newest, if fresh")
    queue_time = serializers.DateTimeField(allow_null=True)
    requests_per_s = serializers.FloatField(allow_null=True)
    completions_per_s = serializers.FloatField(allow_null=True)
    output_tokens_per_s = serializers.FloatField(allow_null=True)
    stages = StageLatest(many=True, help_text="The newest latency summary per stage")
    window = TierWindow(required=False)


class FleetSnapshotSerializer(serializers.Serializer):
    time = serializers.DateTimeField()
    fresh_s = serializers.IntegerField(help_text="A report counts as fresh this many seconds after it arrived")
    tiers = TierSnapshot(many=True)
    node_fields = serializers.ListField(child=serializers.CharField(), required=False)
    nodes = serializers.ListField(child=serializers.ListField(), required=False,
                                  help_text="With ?nodes=true: one row per node, columns as node_fields")


class QueuePoint(serializers.Serializer):
    minute = serializers.DateTimeField()
    queue_depth_mean = serializers.FloatField(allow_null=True)
    queue_depth_max = serializers.IntegerField()
    arrivals_per_s = serializers.FloatField(allow_null=True)
    completions_per_s = serializers.FloatField(allow_null=True)


class QueueLatest(serializers.Serializer):
    time = serializers.DateTimeField()
    queue_depth = serializers.IntegerField()


class TierQueueSeries(serializers.Serializer):
    tier = serializers.ChoiceField(choices=TierKind.choices)
    points = QueuePoint(many=True)
    latest = QueueLatest(allow_null=True)


class QueueDepthSeriesSerializer(serializers.Serializer):
    minutes = serializers.IntegerField()
    step_minutes = serializers.IntegerField(
        help_text="Minutes per point: 1 up to 6 h; longer ranges are merged into bins of whole minutes")
    tiers = TierQueueSeries(many=True)


class LatencyPoint(serializers.Serializer):
    minute = serializers.DateTimeField()
    count = serializers.IntegerField()
    p50_ms = serializers.FloatField(allow_null=True)
    p95_ms = serializers.FloatField(allow_null=True)
    p99_ms = serializers.FloatField(allow_null=True)
    max_ms = serializers.FloatField(allow_null=True)
    exact = serializers.BooleanField(default=False, help_text=EXACT_HELP)


class StageSeries(serializers.Serializer):
    stage = serializers.ChoiceField(choices=Stage.choices)
    points = LatencyPoint(many=True)


class TierStageSeries(serializers.Serializer):
    tier = serializers.ChoiceField(choices=TierKind.choices)
    stages = StageSeries(many=True)


class StageLatencySeriesSerializer(serializers.Serializer):
    minutes = serializers.IntegerField()
    step_minutes = serializers.IntegerField(
        help_text="Minutes per point: 1 up to 6 h; longer ranges are merged into bins of whole minutes")
    tiers = TierStageSeries(many=True)


class LatencyPercentilesSerializer(serializers.Serializer):
    scope = serializers.ChoiceField(choices=["fleet", "tier", "node"])
    tier = serializers.CharField(allow_null=True, help_text="The tier's kind (scope tier)")
    node = serializers.IntegerField(allow_null=True, help_text="The node's id (scope node)")
    minutes = serializers.IntegerField()
    since = serializers.DateTimeField(help_text="First minute of the range")
    until = serializers.DateTimeField(help_text="End of the range (the minute after the current one)")
    stages = StageSummary(many=True, help_text="Stages with latencies in the range; always exact")


class NodeRef(serializers.Serializer):
    id = serializers.IntegerField()
    hostname = serializers.CharField()
    tier = serializers.CharField()
    state = serializers.CharField()


def _read_field(m: metrics.Metric) -> serializers.Field:  # type: ignore[type-arg]
    """A declared metric in a read answer: its type and whether it may be null."""
    cls = serializers.IntegerField if m.is_int else serializers.FloatField
    return cls(allow_null=True) if m.nullable else cls()


def _latest_serializer(name: str, fields: dict[str, Any], declared: tuple[metrics.Metric, ...]
                       ) -> type[serializers.Serializer]:  # type: ignore[type-arg]
    """A node's or module's latest status as the API answers it: ``fields``, then every declared metric."""
    ns = {"__module__": __name__, **fields, **{m.name: _read_field(m) for m in declared}}
    return serializers.SerializerMetaclass(name, (serializers.Serializer,), ns)  # type: ignore[return-value]


NodeLatest = _latest_serializer("NodeLatest", {"time": serializers.DateTimeField(),
                                               "last_seen": serializers.DateTimeField()}, metrics.NODE_METRICS)


class NodePoint(serializers.Serializer):
    minute = serializers.DateTimeField()
    cpu_util_mean = serializers.FloatField()
    cpu_util_max = serializers.FloatField()
    mem_util_mean = serializers.FloatField()
    load1_mean = serializers.FloatField()
    in_flight_mean = serializers.FloatField(allow_null=True)
    in_flight_max = serializers.IntegerField(allow_null=True)


ModuleLatest = _latest_serializer("ModuleLatest", {"time": serializers.DateTimeField()}, metrics.MODULE_METRICS)


class ModulePoint(serializers.Serializer):
    minute = serializers.DateTimeField()
    util_mean = serializers.FloatField(allow_null=True)
    temp_c_max = serializers.FloatField(allow_null=True)
    power_w_mean = serializers.FloatField(allow_null=True)
    link_width_min = serializers.IntegerField(allow_null=True)
    link_width_expected = serializers.IntegerField(allow_null=True)
    ecc_corrected = serializers.IntegerField(allow_null=True)
    ecc_uncorrected = serializers.IntegerField(allow_null=True)
    errors = serializers.IntegerField(allow_null=True)  # type: ignore[assignment]


class ModuleHistory(serializers.Serializer):
    id = serializers.IntegerField()
    serial = serializers.CharField()
    slot = serializers.IntegerField(allow_null=True)
    latest = ModuleLatest(allow_null=True)
    points = ModulePoint(many=True)


class NodeHistorySerializer(serializers.Serializer):
    node = NodeRef()
    minutes = serializers.IntegerField()
    latest = NodeLatest(allow_null=True)
    points = NodePoint(many=True)
    modules = ModuleHistory(many=True)
