"""Planner inputs (strict numbers with sane bounds) and outputs.

A number field takes a JSON number only: not a string, not true/false, not
NaN/Infinity (``1e400`` parses as infinity and is refused too). Each field has
a lower bound (zero or negative only where that means something) and an upper
bound against absurd magnitudes, so no formula divides by zero or overflows.
Query strings (GET what-if) are text by nature: there numeric strings are read.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

from apps.common.errors import CONFLICT
from apps.planner import formulas


def _spell(value: int | float) -> str:
    return formulas.fmt(value)


class NumberField(serializers.FloatField):
    """A finite JSON number within [min, max] (min exclusive when ``min_exclusive``)."""

    default_error_messages = {
        "invalid": "must be a number",
        "string": "must be a number, not a string",
        "boolean": "must be a number, not true/false",
        "not_finite": "must be a finite number",
        "whole": "must be a whole number",
        "too_small": "must be at least {limit}",
        "not_positive": "must be greater than {limit}",
        "too_large": "must be at most {limit}",
    }

    def __init__(self, *, low: int | float, high: int | float, low_exclusive: bool = False,
                 whole: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.low, self.high, self.low_exclusive, self.whole = low, high, low_exclusive, whole

    def to_internal_value(self, data: Any) -> int | float:
        if isinstance(data, bool):
            self.fail("boolean")
        if isinstance(data, str):
            if not self.context.get("numbers_from_text"):
                self.fail("string")
            try:
                parsed = Decimal(data.strip())
            except InvalidOperation:
                self.fail("invalid")
            if not parsed.is_finite():
                self.fail("not_finite")
            data = int(parsed) if parsed == parsed.to_integral_value() and abs(parsed) < 10**18 else float(parsed)
        if not isinstance(data, int | float):
            self.fail("invalid")
        if isinstance(data, float) and not math.isfinite(data):
            self.fail("not_finite")
        value = Fraction(data) if isinstance(data, int) else Fraction(repr(data))
        if self.low_exclusive and value <= formulas.exact(self.low):
            self.fail("not_positive", limit=_spell(self.low))
        if not self.low_exclusive and value < formulas.exact(self.low):
            self.fail("too_small", limit=_spell(self.low))
        if value > formulas.exact(self.high):
            self.fail("too_large", limit=_spell(self.high))
        if self.whole:
            if value.denominator != 1:
                self.fail("whole")
            return int(value)
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class WholeNumberField(NumberField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(whole=True, **kwargs)


def number_schema(field: NumberField) -> dict[str, Any]:
    """A NumberField's schema: integer or number, with its bounds (exclusive minimum where it is)."""
    schema: dict[str, Any] = {"type": "integer" if field.whole else "number"}
    if not field.whole:
        schema["format"] = "double"
    schema["minimum"] = field.low
    if field.low_exclusive:
        schema["exclusiveMinimum"] = True
    schema["maximum"] = field.high
    return schema


class NumberFieldSchema(OpenApiSerializerFieldExtension):
    target_class = NumberField
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return number_schema(self.target)


def _n(low: int | float, high: int | float, help_text: str, *, default: Any = None, exclusive: bool = False,
       whole: bool = False, required: bool | None = None) -> NumberField:
    extra: dict[str, Any] = {"help_text": help_text}
    if required is not None:
        extra["required"] = required
    if default is not None:
        extra["default"] = default
    cls = WholeNumberField if whole else NumberField
    return cls(low=low, high=high, low_exclusive=exclusive, **extra)


class ArrayInputSerializer(serializers.Serializer):
    concurrent_users = _n(1, 10**9, "Users active at the same time", whole=True)
    request_interval_s = _n(0.001, 86_400, "Seconds between one user's requests")
    input_tokens = _n(0, 10**7, "Input (prompt) tokens per request")
    output_tokens = _n(1, 10**7, "Output (generated) tokens per request")
    gflops_per_token = _n(0.001, 100_000, "GFLOPs per output token (≈ 6 for a 1B/7B mix)", default=6)
    module_tops = _n(0.1, 100_000, "INT8 TOPS per module", default=30)
    modules_per_node = _n(1, 4, "Modules per node (1–4)", default=2, whole=True)
    instructions_per_request = _n(1, 10**12, "CPU instructions per request (300k–500k)", default=500_000)
    cpu_count = _n(1, 10**6, "CPUs serving the agent logic", default=1, whole=True)
    cores_per_cpu = _n(1, 1024, "Cores per CPU", default=8, whole=True)
    core_ips = _n(1_000_000, 10**12, "Simple instructions/s per core (≈ 1e9 at 3 GHz)", default=1_000_000_000)
    usable_fraction = _n(0.01, 1, "Fraction of CPU capacity usable in practice (≈ 0.25)", default=0.25)

    def to_inputs(self) -> formulas.ArrayInputs:
        return formulas.ArrayInputs(**self.validated_data)


class ArrayPlanSerializer(serializers.Serializer):
    inputs = serializers.DictField(child=serializers.FloatField(), help_text="The inputs used, defaults filled in")
    requests_per_s = serializers.FloatField()
    input_tokens_per_s = serializers.FloatField()
    output_tokens_per_s = serializers.FloatField()
    compute_tflops = serializers.FloatField(help_text="Model compute in TFLOPs per second")
    modules_needed = serializers.IntegerField()
    nodes_needed = serializers.IntegerField()
    cpu_instructions_per_s = serializers.FloatField()
    cpu_capacity_per_s = serializers.FloatField()
    cpu_headroom = serializers.FloatField(help_text="1 − load ÷ capacity; negative when overloaded")
    explanations = serializers.DictField(child=serializers.CharField(),
                                         help_text="Each output's formula with the numbers filled in")


class AgentInputSerializer(serializers.Serializer):
    agents = _n(1, 10**7, "Concurrent agents", whole=True)
    cores_per_agent = _n(0, 64, "Main-loop CPU cores per agent (0.5–2)", default=1, exclusive=True)
    safety_factor = _n(1, 10, "Safety factor on CPU cores (1.5–2)", default=1.5)
    inferences_per_s_per_agent = _n(0, 10_000, "Model inferences per second per agent", exclusive=True)
    tokens_per_inference = _n(0, 10**7, "Tokens per inference", exclusive=True)
    tokens_per_s_per_accelerator = _n(1, 10**9, "Tokens/s one accelerator card serves")
    batching_gain = _n(1, 100, "Throughput gain from batching (1 = none)", default=1.0)

    def to_inputs(self) -> formulas.AgentInputs:
        return formulas.AgentInputs(**self.validated_data)


class ReferenceConfigurationSerializer(serializers.Serializer):
    agents = serializers.CharField(help_text="The row's agent range, e.g. 5–10")
    cpu = serializers.CharField()
    accelerators = serializers.CharField()
    memory = serializers.CharField()
    exact = serializers.BooleanField(help_text="False: the agents fall between rows and got the next row up")
    explanation = serializers.CharField()


class AgentPlanSerializer(serializers.Serializer):
    inputs = serializers.DictField(child=serializers.FloatField())
    cpu_cores_needed = serializers.IntegerField()
    inference_tokens_per_s = serializers.FloatField()
    accelerators_needed = serializers.IntegerField()
    accelerators_needed_batched = serializers.IntegerField()
    reference_configuration = ReferenceConfigurationSerializer()
    explanations = serializers.DictField(child=serializers.CharField())


class CostInputSerializer(serializers.Serializer):
    gpu_server_price = _n(1, 10**9, "Price of one 8-GPU (A100) server", default=200_000)
    cpu_node_price = _n(0, 10**9, "Price of one high-clock CPU node", default=12_000)
    module_price = _n(0, 10**9, "Price of one module", default=4_000)
    cpu_nodes = _n(0, 10**6, "CPU nodes in the planned array", default=10, whole=True)
    modules = _n(0, 10**7, "Modules in the planned array", default=20, whole=True)
    concurrent_users = _n(1, 10**9, "Concurrent users the plan serves", default=1000, whole=True)

    def to_inputs(self) -> formulas.CostInputs:
        return formulas.CostInputs(**self.validated_data)


class CostComparisonSerializer(serializers.Serializer):
    inputs = serializers.DictField(child=serializers.FloatField())
    rule_of_thumb_array_cost = serializers.FloatField(help_text="10 CPU nodes and 20 modules at your prices")
    rule_of_thumb_ratio = serializers.FloatField(help_text="That array's cost ÷ one 8-GPU server (≈ 1 by the rule)")
    plan_array_cost = serializers.FloatField()
    gpu_servers_equivalent = serializers.IntegerField()
    gpu_cost = serializers.FloatField()
    plan_saving = serializers.FloatField(help_text="GPU cost − array cost; negative when the array costs more")
    explanations = serializers.DictField(child=serializers.CharField())


class ChartSerializer(serializers.Serializer):
    figure = serializers.DictField(help_text="A Plotly figure (data and layout) for Plotly.react")


class WhatIfInputSerializer(serializers.Serializer):
    """All optional: missing traffic numbers come from telemetry."""

    # The traffic's two forms (``validate``), as the body's schema states them: concurrent_users and
    # request_interval_s together and without requests_per_s, or neither of the two.
    schema_rules = {"anyOf": [
        {"required": ["concurrent_users", "request_interval_s"], "not": {"required": ["requests_per_s"]}},
        {"not": {"anyOf": [{"required": ["concurrent_users"]}, {"required": ["request_interval_s"]}]}},
    ]}

    window_s = _n(60, 7 * 86_400, "Telemetry window to average over, seconds", default=900, whole=True)
    requests_per_s = _n(0, 10**9, "Request rate; instead of concurrent_users and request_interval_s",
                        required=False)
    concurrent_users = _n(1, 10**9, "Users active at the same time", whole=True, required=False)
    request_interval_s = _n(0.001, 86_400, "Seconds between one user's requests", required=False)
    input_tokens = _n(0, 10**7, "Input tokens per request", required=False)
    output_tokens = _n(0, 10**7, "Output tokens per request", required=False)
    gflops_per_token = _n(0.001, 100_000, "GFLOPs per output token", default=6)
    module_tops = _n(0.1, 100_000, "INT8 TOPS per module (default: the installed modules' mean)", required=False)
    modules_per_node = _n(1, 4, "Modules per node (default: the installed mean)", required=False)
    instructions_per_request = _n(1, 10**12, "CPU instructions per request", default=500_000)
    core_ips = _n(1_000_000, 10**12, "Instructions/s per core at 3 GHz (scaled by each node's clock)",
                  default=1_000_000_000)
    usable_fraction = _n(0.01, 1, "Usable fraction of CPU capacity", default=0.25)
    target_cpu_headroom = _n(0, 0.95, "CPU headroom to keep on the access & logic tier", default=0)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # The body's schema states this rule (schema_rules): a 400. Query parameters cannot state
        # it, so there it is a rule between values the schema leaves out: a 409 (CONFLICT), documented.
        code = CONFLICT if self.context.get("numbers_from_text") else "invalid"
        users, interval = attrs.get("concurrent_users"), attrs.get("request_interval_s")
        if (users is None) != (interval is None):
            missing = "request_interval_s" if interval is None else "concurrent_users"
            raise serializers.ValidationError({missing: ["give concurrent_users and request_interval_s together"]},
                                              code=code)
        if users is not None and "requests_per_s" in attrs:
            raise serializers.ValidationError(
                {"requests_per_s": ["give either requests_per_s or concurrent_users and request_interval_s"]},
                code=code)
        return attrs


class AutoscalerViewSerializer(serializers.Serializer):
    current = serializers.IntegerField(help_text="Active nodes the autoscaler counted")
    queue_depth = serializers.FloatField(help_text="Requests waiting at the tier")
    target_per_node = serializers.FloatField(help_text="The queue per node the autoscaler aims at")
    raw = serializers.IntegerField(help_text="Its formula: ceil(current × queue per node ÷ target)")
    desired = serializers.IntegerField(help_text="After its bounds, stabilisation, step limits and cooldown")
    dry_run = serializers.BooleanField()
    as_of = serializers.CharField(help_text="Its latest evaluation (ISO time)")
    comparison = serializers.CharField(help_text="Why the plan's nodes and the autoscaler's differ, in words")


class TierPlanSerializer(serializers.Serializer):
    tier = serializers.CharField()
    name = serializers.CharField()
    active_nodes = serializers.IntegerField()
    standby_nodes = serializers.IntegerField()
    nodes_needed = serializers.IntegerField(allow_null=True)
    nodes_delta = serializers.IntegerField(help_text="Active nodes to add (+) or release (−), within min/max")
    modules_delta = serializers.IntegerField(allow_null=True, help_text="Modules to add (+) or release (−)")
    action = serializers.CharField()
    binding = serializers.CharField(
        help_text="The limit that sets the recommendation: formula (request counts), utilisation (measured "
                  "work), queue (a growing queue), minimum or maximum (the tier's bounds), none")
    installed = serializers.DictField(child=serializers.FloatField(allow_null=True))
    needed = serializers.DictField(child=serializers.FloatField(allow_null=True))
    explanations = serializers.DictField(child=serializers.CharField())
    autoscaler = AutoscalerViewSerializer(
        allow_null=True, help_text="The tier autoscaler's latest decision beside the plan (array tiers with one)")


class DemandSerializer(serializers.Serializer):
    source = serializers.CharField(help_text="telemetry, user or telemetry+user")  # type: ignore[assignment]
    window_s = serializers.IntegerField(allow_null=True)
    requests_per_s = serializers.FloatField()
    input_tokens_per_request = serializers.FloatField()
    output_tokens_per_request = serializers.FloatField()
    explanation = serializers.CharField()


class WhatIfSerializer(serializers.Serializer):
    demand = DemandSerializer()
    plan = serializers.DictField(child=serializers.FloatField())
    tiers = TierPlanSerializer(many=True)
    explanations = serializers.DictField(child=serializers.CharField())
