"""API shapes. The ingest serializers describe the batch for the OpenAPI
schema; the batch itself is validated by ``apps.telemetry.validation`` (fast,
whole-batch, errors by path)."""

from __future__ import annotations

from rest_framework import serializers

from apps.inventory.choices import TierKind
from apps.telemetry.choices import ACK_STATES, Stage
from apps.telemetry.models import NodeCommand

# ---- ingest (schema) --------------------------------------------------------------------------


class ModuleSampleIn(serializers.Serializer):
    serial = serializers.CharField()
    util = serializers.FloatField(min_value=0, max_value=1, help_text="Utilisation, fraction 0..1")
    temp_c = serializers.FloatField()
    power_w = serializers.FloatField(min_value=0)
    link_width = serializers.IntegerField(min_value=0, max_value=32, help_text="PCIe lanes trained")
    link_width_expected = serializers.IntegerField(min_value=0, max_value=32, help_text="PCIe lanes expected")
    ecc_corrected = serializers.IntegerField(min_value=0, help_text="Cumulative since boot")
    ecc_uncorrected = serializers.IntegerField(min_value=0, help_text="Cumulative since boot")
    errors = serializers.IntegerField(min_value=0, help_text="Cumulative since boot")  # type: ignore[assignment]


class NodeSampleIn(serializers.Serializer):
    time = serializers.DateTimeField()
    node = serializers.CharField(help_text="Hostname; must be the key's own node")
    cpu_util = serializers.FloatField(min_value=0, max_value=1)
    mem_util = serializers.FloatField(min_value=0, max_value=1)
    load1 = serializers.FloatField(min_value=0)
    in_flight = serializers.IntegerField(min_value=0)
    threads = serializers.IntegerField(min_value=0)
    modules = ModuleSampleIn(many=True, required=False)


class TierSampleIn(serializers.Serializer):
    time = serializers.DateTimeField()
    tier = serializers.ChoiceField(choices=TierKind.choices)
    window_s = serializers.FloatField(help_text="Seconds the counts cover")
    queue_depth = serializers.IntegerField(min_value=0)
    arrivals = serializers.IntegerField(min_value=0)
    completions = serializers.IntegerField(min_value=0)
    input_tokens = serializers.IntegerField(min_value=0, required=False)
    output_tokens = serializers.IntegerField(min_value=0, required=False)


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


# ---- command channel --------------------------------------------------------------------------


class AgentCommandSerializer(serializers.ModelSerializer):
    class Meta:
        model = NodeCommand
        fields = ["id", "kind", "args", "created_at"]


class CommandAckSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=[(s.value, s.label) for s in ACK_STATES])
    result = serializers.JSONField(required=False, default=dict)


class NodeCommandSerializer(serializers.ModelSerializer):
    node_hostname = serializers.CharField(source="node.hostname", read_only=True)

    class Meta:
        model = NodeCommand
        fields = ["id", "node", "node_hostname", "kind", "args", "reason", "state", "created_at",
                  "created_by_name", "expires_at", "delivered_at", "finished_at", "result"]
        read_only_fields = ["state", "created_at", "created_by_name", "delivered_at", "finished_at", "result"]
        extra_kwargs = {"reason": {"required": False}, "expires_at": {"required": False}}

    def validate_kind(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("must not be blank")
        return value.strip()

    def validate_args(self, value: object) -> object:
        if not isinstance(value, dict):
            raise serializers.ValidationError('must be a JSON object, e.g. {"deadline_s": 300}')
        return value


# ---- fleet (response shapes) --------------------------------------------------------------------


class MeanP95(serializers.Serializer):
    mean = serializers.FloatField(allow_null=True, help_text="Mean of the node-minutes in the window")
    p95 = serializers.FloatField(allow_null=True, help_text="95th percentile of the node-minutes in the window")
    now = serializers.FloatField(allow_null=True, help_text="Mean of the latest samples (last 2 minutes)")


class NodeCounts(serializers.Serializer):
    active = serializers.IntegerField()
    standby = serializers.IntegerField()
    draining = serializers.IntegerField()
    total = serializers.IntegerField()
    reporting = serializers.IntegerField(help_text="Nodes with a sample in the last 2 minutes")
    by_state = serializers.DictField(child=serializers.IntegerField())


class QueueDepthNow(serializers.Serializer):
    now = serializers.IntegerField(allow_null=True)
    time = serializers.DateTimeField(allow_null=True)
    mean = serializers.FloatField(allow_null=True)
    max = serializers.IntegerField(allow_null=True)


class StageSummary(serializers.Serializer):
    stage = serializers.ChoiceField(choices=Stage.choices)
    count = serializers.IntegerField()
    p50_ms = serializers.FloatField(allow_null=True, help_text="Count-weighted mean of the minutes' p50")
    p95_ms = serializers.FloatField(allow_null=True, help_text="Worst minute")
    p99_ms = serializers.FloatField(allow_null=True, help_text="Worst minute")
    max_ms = serializers.FloatField(allow_null=True)


class TierSnapshot(serializers.Serializer):
    kind = serializers.CharField(help_text="The tier's kind, as in ?tier=")
    name = serializers.CharField()
    level = serializers.IntegerField()
    nodes = NodeCounts()
    cpu_util = MeanP95()
    module_util = MeanP95()
    queue_depth = QueueDepthNow()
    requests_per_s = serializers.FloatField(allow_null=True)
    completions_per_s = serializers.FloatField(allow_null=True)
    stages = StageSummary(many=True)


class FleetSnapshotSerializer(serializers.Serializer):
    time = serializers.DateTimeField()
    window_minutes = serializers.IntegerField()
    tiers = TierSnapshot(many=True)


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
    tiers = TierQueueSeries(many=True)


class LatencyPoint(serializers.Serializer):
    minute = serializers.DateTimeField()
    count = serializers.IntegerField()
    p50_ms = serializers.FloatField()
    p95_ms = serializers.FloatField()
    p99_ms = serializers.FloatField()
    max_ms = serializers.FloatField()


class StageSeries(serializers.Serializer):
    stage = serializers.ChoiceField(choices=Stage.choices)
    points = LatencyPoint(many=True)


class TierStageSeries(serializers.Serializer):
    tier = serializers.ChoiceField(choices=TierKind.choices)
    stages = StageSeries(many=True)


class StageLatencySeriesSerializer(serializers.Serializer):
    minutes = serializers.IntegerField()
    tiers = TierStageSeries(many=True)


class NodeRef(serializers.Serializer):
    id = serializers.IntegerField()
    hostname = serializers.CharField()
    tier = serializers.CharField()
    state = serializers.CharField()


class NodeLatest(serializers.Serializer):
    time = serializers.DateTimeField()
    last_seen = serializers.DateTimeField()
    cpu_util = serializers.FloatField()
    mem_util = serializers.FloatField()
    load1 = serializers.FloatField()
    in_flight = serializers.IntegerField()
    threads = serializers.IntegerField()


class NodePoint(serializers.Serializer):
    minute = serializers.DateTimeField()
    cpu_util_mean = serializers.FloatField()
    cpu_util_max = serializers.FloatField()
    mem_util_mean = serializers.FloatField()
    load1_mean = serializers.FloatField()
    in_flight_mean = serializers.FloatField()
    in_flight_max = serializers.IntegerField()


class ModuleLatest(serializers.Serializer):
    time = serializers.DateTimeField()
    util = serializers.FloatField()
    temp_c = serializers.FloatField()
    power_w = serializers.FloatField()
    link_width = serializers.IntegerField()
    link_width_expected = serializers.IntegerField()
    ecc_corrected = serializers.IntegerField()
    ecc_uncorrected = serializers.IntegerField()
    errors = serializers.IntegerField()  # type: ignore[assignment]


class ModulePoint(serializers.Serializer):
    minute = serializers.DateTimeField()
    util_mean = serializers.FloatField()
    temp_c_max = serializers.FloatField()
    power_w_mean = serializers.FloatField()
    link_width_min = serializers.IntegerField()
    link_width_expected = serializers.IntegerField()
    ecc_corrected = serializers.IntegerField()
    ecc_uncorrected = serializers.IntegerField()
    errors = serializers.IntegerField()  # type: ignore[assignment]


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


class AgentSelfModule(serializers.Serializer):
    serial = serializers.CharField()
    slot = serializers.IntegerField(allow_null=True)
    module_type = serializers.CharField()
    pcie_lanes = serializers.IntegerField(help_text="Lanes the module type needs: its expected link width")
    state = serializers.CharField()
    driver_version = serializers.CharField()
    framework_version = serializers.CharField()


class AgentSelfNode(serializers.Serializer):
    id = serializers.IntegerField()
    hostname = serializers.CharField()
    state = serializers.CharField()
    tier = serializers.CharField()


class AgentSelfSerializer(serializers.Serializer):
    node = AgentSelfNode()
    modules = AgentSelfModule(many=True)
