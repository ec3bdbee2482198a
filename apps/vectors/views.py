"""Pages: version combinations with their vector runs, and one run's results. Actions
(start a run, validate a candidate, cancel) go through the API."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.shortcuts import get_object_or_404
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.generic import RedirectView, TemplateView

from apps.common.views import PLOTLY_VERSION, ViewerRequiredMixin
from apps.inventory import scopes
from apps.inventory.models import Module, VersionCombination
from apps.inventory.selectors import combination_overview
from apps.vectors import selectors, validation
from apps.vectors.charts import operator_figure
from apps.vectors.choices import FINAL_RUN_STATES, Outcome, RunState
from apps.vectors.models import VectorRun

RESULTS_SHOWN = 500


def _colour(run: VectorRun) -> VectorRun:
    run.colour = RunState.colour_of(run.state)  # type: ignore[attr-defined]
    return run


def _offers(user: Any, combos: list[VersionCombination]) -> None:
    """Whether the user's scope lets it run a suite on each combination's modules and validate it on the
    gray pool: every node the run would reach within the scope, as the run's creation checks."""
    fleet = scopes.may_act_on_subject(actor=user)  # the whole fleet: every node within

    def within(modules: Iterable[Module]) -> bool:
        ids = {m.node_id for m in modules if m.node_id is not None}
        return not scopes.nodes_outside(actor=user, nodes=scopes.nodes_for_check(ids))

    gray: dict[int, bool] = {}
    for c in combos:
        c.run_acts = fleet or within(selectors.combination_modules(c))  # type: ignore[attr-defined]
        if c.module_type_id not in gray:
            gray[c.module_type_id] = fleet or within(validation.gray_modules(c))
        c.validate_acts = gray[c.module_type_id]  # type: ignore[attr-defined]


@method_decorator(ensure_csrf_cookie, name="dispatch")
class OldVersionsAddress(ViewerRequiredMixin, RedirectView):
    """The vector page's first address (/versions/), kept for bookmarks: a viewer is sent on to
    /vectors/ with the query; anyone else to the login page, as from every page."""

    http_method_names = ["get", "head", "options"]  # a page's methods, not every method RedirectView takes
    pattern_name = "versions"
    permanent = True
    query_string = True


class VersionsView(ViewerRequiredMixin, TemplateView):
    """Per module type, each combination's state and its latest vector runs."""

    template_name = "vectors/versions.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        types = combination_overview()
        combos = [c for t in types for c in t["combinations"]]
        runs = selectors.runs_by_combination(combos)
        for c in combos:
            c.recent_runs = [_colour(r) for r in runs.get(c.pk, [])]  # type: ignore[attr-defined]
        _offers(self.request.user, combos)
        charts = {}
        for t in types:
            points = selectors.operator_points(module_type_id=t["module_type"].pk)
            if points:
                charts[f"vector-chart-{t['module_type'].pk}"] = operator_figure(points)
                t["chart_id"] = f"vector-chart-{t['module_type'].pk}"
        ctx.update(nav="vectors", module_types=types, charts=charts, plotly_version=PLOTLY_VERSION,
                   other_runs=[_colour(r) for r in selectors.run_list().filter(combination__isnull=True)[:10]],
                   suites=list(selectors.suite_list().filter(state="published")),
                   suite=selectors.suite_list().filter(name="onnx-int8", state="published").order_by("-version").first()
                   or selectors.suite_list().filter(state="published").order_by("-published_at").first())
        return ctx


@method_decorator(ensure_csrf_cookie, name="dispatch")
class RunDetailView(ViewerRequiredMixin, TemplateView):
    """One run: progress, per module, per case (``?outcome=fail`` shows the failing ones)."""

    template_name = "vectors/run_detail.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        run = _colour(get_object_or_404(selectors.run_list(), pk=kwargs["pk"]))
        outcome = self.request.GET.get("outcome", "")
        results = selectors.result_list().filter(run=run).order_by("vector__operator", "vector__name",
                                                                   "module__serial")
        if outcome in Outcome.values:
            results = results.filter(outcome=outcome)
        rows = list(results[:RESULTS_SHOWN])
        for r in rows:
            r.colour = Outcome.colour_of(r.outcome)  # type: ignore[attr-defined]
        ctx.update(nav="vectors", run=run, progress=selectors.run_progress(run), results=rows,
                   outcome=outcome, outcomes=Outcome.choices, live=run.state not in FINAL_RUN_STATES,
                   shown_limit=RESULTS_SHOWN)
        return ctx
