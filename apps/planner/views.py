"""The planner page."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseBase
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.generic import TemplateView

from apps.common.roles import VIEWER, has_role
from apps.common.views import PLOTLY_VERSION
from apps.planner import charts, formulas
from apps.planner.api import serializers as s


def _form_fields(serializer: Any) -> list[dict[str, Any]]:
    fields = []
    for name, field in serializer.fields.items():
        fields.append({
            "name": name, "label": name.replace("_", " "), "help": field.help_text or "",
            "value": "" if field.default.__class__.__name__ == "empty" else field.default,
            "required": field.required, "step": "1" if getattr(field, "whole", False) else "any",
        })
    return fields


# The worked example of docs/domain.md is what the page opens with.
ARRAY_EXAMPLE = {"concurrent_users": 1000, "request_interval_s": 2, "input_tokens": 500, "output_tokens": 100}
AGENT_EXAMPLE = {"agents": 10, "inferences_per_s_per_agent": 2, "tokens_per_inference": 500,
                 "tokens_per_s_per_accelerator": 2000, "batching_gain": 1.7}


@method_decorator(ensure_csrf_cookie, name="dispatch")
class PlannerView(LoginRequiredMixin, TemplateView):
    template_name = "planner/planner.html"

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.user.is_authenticated and not has_role(request.user, VIEWER):
            raise PermissionDenied("the planner needs the viewer role")
        return super().dispatch(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        array_fields = _form_fields(s.ArrayInputSerializer())
        agent_fields = _form_fields(s.AgentInputSerializer())
        cost_fields = [f for f in _form_fields(s.CostInputSerializer()) if f["name"].endswith("_price")]
        for f in array_fields:
            f["value"] = ARRAY_EXAMPLE.get(f["name"], f["value"])
        for f in agent_fields:
            f["value"] = AGENT_EXAMPLE.get(f["name"], f["value"])
        array_inputs = formulas.ArrayInputs(**ARRAY_EXAMPLE)  # type: ignore[arg-type]
        ctx.update({
            "array_fields": array_fields,
            "agent_fields": agent_fields,
            "cost_fields": cost_fields,
            "array_outputs": [
                ("requests_per_s", "requests/s"), ("input_tokens_per_s", "input tokens/s"),
                ("output_tokens_per_s", "output tokens/s"), ("compute_tflops", "model compute, TFLOPs/s"),
                ("modules_needed", "modules"), ("nodes_needed", "nodes"),
                ("cpu_instructions_per_s", "CPU load, instructions/s"),
                ("cpu_capacity_per_s", "CPU capacity, instructions/s"), ("cpu_headroom", "CPU headroom"),
            ],
            "agent_outputs": [
                ("cpu_cores_needed", "CPU cores"), ("inference_tokens_per_s", "inference tokens/s"),
                ("accelerators_needed", "accelerators"), ("accelerators_needed_batched", "accelerators, batched"),
                ("reference_configuration", "reference configuration"),
            ],
            "cost_outputs": [
                ("rule_of_thumb_array_cost", "array of 10 CPU nodes + 20 modules"),
                ("rule_of_thumb_ratio", "that array ÷ one 8-GPU server"),
                ("plan_array_cost", "your plan's array"),
                ("gpu_servers_equivalent", "8-GPU servers for the same users"),
                ("gpu_cost", "GPU servers' cost"), ("plan_saving", "GPU cost − array cost"),
            ],
            "initial_figure": charts.users_figure(array_inputs),
            "plotly_version": PLOTLY_VERSION,
        })
        return ctx
