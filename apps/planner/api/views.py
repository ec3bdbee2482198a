"""Planner endpoints: computations a viewer may POST to; nothing is stored."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, cast

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.common.permissions import ViewerAll
from apps.planner import charts, formulas, selectors
from apps.planner.api import serializers as s
from apps.planner.what_if import WhatIfParams


def _validated(serializer_cls: type[Any], data: Any, **context: Any) -> Any:
    serializer = serializer_cls(data=data, context=context)
    serializer.is_valid(raise_exception=True)
    return serializer


class ArraySizingView(APIView):
    """Array sizing from traffic: requests/s, tokens/s, model compute, modules, nodes and CPU headroom."""

    permission_classes = [ViewerAll]

    @extend_schema(request=s.ArrayInputSerializer, responses={200: s.ArrayPlanSerializer})
    def post(self, request: Request) -> Response:
        serializer = _validated(s.ArrayInputSerializer, request.data)
        plan = formulas.size_array(serializer.to_inputs())
        return Response({"inputs": serializer.validated_data, **asdict(plan)})


class ArrayChartView(APIView):
    """A Plotly figure of modules needed and CPU headroom against concurrent users (0 to twice the input)."""

    permission_classes = [ViewerAll]

    @extend_schema(request=s.ArrayInputSerializer, responses={200: s.ChartSerializer})
    def post(self, request: Request) -> Response:
        serializer = _validated(s.ArrayInputSerializer, request.data)
        return Response({"figure": charts.users_figure(serializer.to_inputs())})


class AgentSizingView(APIView):
    """Agent sizing: CPU cores, inference tokens/s, accelerator cards, and the reference configuration."""

    permission_classes = [ViewerAll]

    @extend_schema(request=s.AgentInputSerializer, responses={200: s.AgentPlanSerializer})
    def post(self, request: Request) -> Response:
        serializer = _validated(s.AgentInputSerializer, request.data)
        plan = formulas.size_agents(serializer.to_inputs())
        ref = plan.reference
        return Response({
            "inputs": serializer.validated_data,
            "cpu_cores_needed": plan.cpu_cores_needed,
            "inference_tokens_per_s": plan.inference_tokens_per_s,
            "accelerators_needed": plan.accelerators_needed,
            "accelerators_needed_batched": plan.accelerators_needed_batched,
            "reference_configuration": {
                "agents": ref.row.agents, "cpu": ref.row.cpu, "accelerators": ref.row.accelerators,
                "memory": ref.row.memory, "exact": ref.exact, "explanation": ref.explanation,
            },
            "explanations": dict(plan.explanations),
        })


class CostComparisonView(APIView):
    """The rule of thumb: one 8-GPU server against an array of CPU nodes and modules, at your prices."""

    permission_classes = [ViewerAll]

    @extend_schema(request=s.CostInputSerializer, responses={200: s.CostComparisonSerializer})
    def post(self, request: Request) -> Response:
        serializer = _validated(s.CostInputSerializer, request.data)
        result = formulas.compare_cost(serializer.to_inputs())
        return Response({"inputs": serializer.validated_data, **asdict(result)})


_WHAT_IF_QUERY = [
    OpenApiParameter(name, s.number_schema(cast(s.NumberField, field)), required=False,
                     description=field.help_text or "")
    for name, field in s.WhatIfInputSerializer().fields.items()
]


class WhatIfView(APIView):
    """The plan for observed traffic (or your numbers) against the installed capacity per tier.

    Missing traffic numbers come from telemetry; with no telemetry yet, 409 asks for them.
    """

    permission_classes = [ViewerAll]
    conflicts = {
        "get": "No telemetry yet to fill in the traffic numbers left out, or concurrent_users and "
               "request_interval_s not given together, or given with requests_per_s (`errors` names them)",
        "post": "No telemetry yet to fill in the traffic numbers left out (`errors` names them)",
    }

    @extend_schema(parameters=_WHAT_IF_QUERY, responses={200: s.WhatIfSerializer})
    def get(self, request: Request) -> Response:
        return self._answer(_validated(s.WhatIfInputSerializer, request.query_params.dict(), numbers_from_text=True))

    @extend_schema(request=s.WhatIfInputSerializer, responses={200: s.WhatIfSerializer})
    def post(self, request: Request) -> Response:
        return self._answer(_validated(s.WhatIfInputSerializer, request.data))

    def _answer(self, serializer: Any) -> Response:
        data = dict(serializer.validated_data)
        window_s = data.pop("window_s")
        numbers = {k: data.pop(k, None) for k in ("requests_per_s", "concurrent_users", "request_interval_s",
                                                  "input_tokens", "output_tokens")}
        result, window = selectors.what_if(window_s=window_s, params=WhatIfParams(**data), **numbers)
        demand = result.demand
        return Response({
            "demand": {
                "source": demand.source, "window_s": window,
                "requests_per_s": float(formulas.exact(demand.requests_per_s)),
                "input_tokens_per_request": float(formulas.exact(demand.input_tokens_per_request)),
                "output_tokens_per_request": float(formulas.exact(demand.output_tokens_per_request)),
                "explanation": demand.explanation,
            },
            "plan": dict(result.plan),
            "tiers": [asdict(t) for t in result.tiers],
            "explanations": dict(result.explanations),
        })
