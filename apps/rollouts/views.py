"""Pages: rollouts (list), one rollout (progress per wave, each node's step and what it waits
for, gate evidence; controls for operators), and a new rollout from the versions page (preview
first, then start with a reason). The pages read through selectors; the controls post to the API."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.shortcuts import get_object_or_404
from django.views.generic import TemplateView

from apps.accounts.selectors import scope_limit_text
from apps.common.views import PLOTLY_VERSION, ViewerRequiredMixin
from apps.inventory import scopes
from apps.inventory.choices import CombinationState
from apps.inventory.models import Node, Rack, Tier, VersionCombination
from apps.rollouts import selectors
from apps.rollouts.choices import OnFailure, RolloutState, Step
from apps.rollouts.services import ROLLABLE_STATES, default_suite


class RolloutListView(ViewerRequiredMixin, TemplateView):
    template_name = "rollouts/list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        rollouts = list(selectors.rollout_list()[:50])
        for r in rollouts:
            r.colour = RolloutState.colour_of(r.state)  # type: ignore[attr-defined]
            r.progress = selectors.progress(r)  # type: ignore[attr-defined]
        validated = (VersionCombination.objects.filter(state=CombinationState.VALIDATED)
                     .select_related("module_type", "driver", "framework"))
        ctx.update(nav="rollouts", rollouts=rollouts, validated=list(validated))
        return ctx


class RolloutDetailView(ViewerRequiredMixin, TemplateView):
    template_name = "rollouts/detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        rollout = get_object_or_404(selectors.rollout_list(), pk=kwargs["pk"])
        nodes = list(selectors.rollout_nodes(rollout))
        for rn in nodes:
            rn.colour = Step.colour_of(rn.step)  # type: ignore[attr-defined]
        progress = selectors.progress(rollout)
        # the controls need every node of the rollout within the user's scope, as the API checks
        outside = scopes.nodes_outside(actor=self.request.user, nodes=[rn.node for rn in nodes])
        ctx.update(nav="rollouts", rollout=rollout, nodes=nodes, progress=progress, plotly_version=PLOTLY_VERSION,
                   outside=len(outside), scope_text=scope_limit_text(user=self.request.user),
                   colour=RolloutState.colour_of(rollout.state),
                   config={"api": f"/api/v1/rollouts/{rollout.pk}/", "id": rollout.pk, "ws": "/ws/fleet/",
                           "step_colours": Step.colours(), "state_colours": RolloutState.colours()})
        return ctx


class RolloutNewView(ViewerRequiredMixin, TemplateView):
    """Start a rollout of a validated combination: the form, the preview, then the start."""

    template_name = "rollouts/new.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        given = self.request.GET.get("combination", "")
        if not given.isdigit():
            raise Http404("name the combination to roll out: /rollouts/new/?combination=<its id>")
        combination = get_object_or_404(
            VersionCombination.objects.select_related("module_type", "driver", "framework"), pk=int(given))
        # ?nodes=1,2,3: a rollout to these nodes only (the drift page's "back to the pin")
        wanted = self.request.GET.get("nodes", "")
        if wanted and not all(part.strip().isdigit() for part in wanted.split(",")):
            raise Http404("nodes: node ids separated by commas, e.g. ?nodes=3,7")
        nodes = list(Node.objects.filter(pk__in=[int(p) for p in wanted.split(",")]).order_by("hostname")
                     ) if wanted else []
        suite = default_suite(combination)
        ctx.update(nav="rollouts", combination=combination, rollable=combination.state in ROLLABLE_STATES,
                   only_nodes=nodes,
                   scope_text=scope_limit_text(user=self.request.user),
                   suite=suite, tiers=list(Tier.objects.order_by("level")), racks=list(Rack.objects.all()),
                   on_failure=OnFailure.choices,
                   config={"preview": "/api/v1/rollouts/preview/", "create": "/api/v1/rollouts/",
                           "combination": combination.pk, "module_type": combination.module_type_id,
                           "nodes": [n.pk for n in nodes],
                           "suite": suite.pk if suite else None})
        return ctx
