"""Pages: open findings by severity and tier with the advisor's causes, acknowledge and
silence with a reason (operators)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.views import View
from django.views.generic import TemplateView
from rest_framework.exceptions import APIException

from apps.accounts.selectors import scope_limit_text
from apps.audit.choices import Source
from apps.common.roles import OPERATOR, has_role
from apps.common.views import ViewerRequiredMixin
from apps.health import selectors, services
from apps.health.advisor import advice
from apps.health.checks import CHECKS
from apps.health.choices import Evidence, Policy, Severity, SubjectKind
from apps.health.evidence import evidence_rows, param_rows
from apps.health.models import Finding
from apps.inventory import scopes
from apps.inventory.models import Node, Tier


def decorate(findings: list[Finding], now: dt.datetime | None = None) -> list[Finding]:
    """Attach the advisor's causes, the severity colour, an active silence and the evidence as labelled values
    to each finding."""
    silences = selectors.active_silences(now=now)
    for f in findings:
        f.advice = advice(f.check_name, node_id=f.node_id, tier_id=f.tier_id)  # type: ignore[attr-defined]
        f.colour = Severity.colour_of(f.severity)  # type: ignore[attr-defined]
        f.silenced = selectors.is_silenced(f, silences)  # type: ignore[attr-defined]
        f.title = check_title(f.check_name)  # type: ignore[attr-defined]
        f.evidence_rows = evidence_rows(f.check_name, f.evidence)  # type: ignore[attr-defined]
    return findings


def check_title(name: str) -> str:
    return CHECKS[name].title if name in CHECKS else name.replace("_", " ").capitalize()


def findings_context(findings: list[Finding], *, actor: Any) -> dict[str, Any]:
    """What a page's findings section renders: one card per (check, cause) with its subjects, each with the
    actions offered to ``actor``, and the open and acknowledged counts."""
    offers = selectors.finding_offers(findings, actor=actor)
    for f in decorate(findings):
        f.offers = offers.get(f.pk, [])  # type: ignore[attr-defined]
        # an operator is told why a finding outside its scope offers nothing (the API would refuse)
        outside = has_role(actor, OPERATOR) and not scopes.may_act_on_subject(
            actor=actor, node=f.node, module=f.module, tier=f.tier)
        f.outside = outside  # type: ignore[attr-defined]
    groups = selectors.finding_groups(findings)
    for g in groups:
        # one reason for every open finding of the card the actor may acknowledge (two or more)
        urls = [o["url"] for f in g.findings for o in offers.get(f.pk, []) if o["action"] == "acknowledge"]
        g.acknowledge_all = json.dumps(urls) if len(urls) > 1 else ""  # type: ignore[attr-defined]
    return {"groups": groups, "counts": selectors.finding_counts(findings)}


def check_rows() -> list[dict[str, Any]]:
    """Every check as an operator reads it: what it watches and reads, its policy and hysteresis, its
    parameters with labels and units."""
    return [{"name": name, "title": CHECKS[name].title, "subject": SubjectKind(CHECKS[name].subject).label,
             "evidence": Evidence(CHECKS[name].evidence).label, "policy": Policy(cfg.policy).label.split(" (")[0],
             "policy_text": Policy(cfg.policy).label, "enabled": cfg.enabled, "raise_n": cfg.raise_n,
             "raise_m": cfg.raise_m, "clear_k": cfg.clear_k, "params": param_rows(cfg.params)}
            for name, cfg in selectors.check_configs().items()]


class HealthView(ViewerRequiredMixin, TemplateView):
    template_name = "health/index.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        q = self.request.GET
        found = selectors.open_findings()
        if q.get("severity"):
            found = [f for f in found if f.severity == q["severity"]]
        if q.get("tier"):
            found = [f for f in found if str(f.tier_id) == q["tier"]]
        if q.get("check"):
            found = [f for f in found if f.check_name == q["check"]]
        recent = list(selectors.finding_list().filter(state="resolved")[:10])
        for f in recent:
            f.title = check_title(f.check_name)  # type: ignore[attr-defined]
        for s in (silences := selectors.active_silences()):
            s.title = check_title(s.check_name) if s.check_name else "Every check"  # type: ignore[attr-defined]
            s.where = s.node.hostname if s.node else s.tier.name if s.tier else "the fleet"  # type: ignore[attr-defined]
        user = self.request.user
        tiers = list(Tier.objects.order_by("level"))
        ctx.update(nav="health", **findings_context(found, actor=user), severities=Severity.choices,
                   tiers=tiers,
                   # a silence is offered for the tiers the user's scope holds; a scoped user names a tier
                   # or a node within it (a fleet-wide silence needs the whole fleet)
                   silence_tiers=[t for t in tiers if scopes.may_act_on_subject(actor=user, tier=t)],
                   scope_text=scope_limit_text(user=user),
                   checks=sorted(((n, c.title) for n, c in CHECKS.items()), key=lambda c: c[1]), selected=q,
                   check_table=check_rows(), recent=recent, silences=silences)
        return ctx


class _OperatorPost(ViewerRequiredMixin, View):
    required_role = OPERATOR

    def back(self, request: HttpRequest) -> HttpResponse:
        return HttpResponseRedirect(request.POST.get("next") or "/health/")

    def run(self, request: HttpRequest, fn: Any, done: str) -> HttpResponse:
        try:
            fn()
        except ValidationError as exc:
            messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items()))
        except APIException as exc:
            messages.error(request, str(exc.detail))
        else:
            messages.success(request, done)
        return self.back(request)


class AcknowledgeView(_OperatorPost):
    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        finding = get_object_or_404(Finding, pk=pk)
        return self.run(request, lambda: services.finding_acknowledge(
            finding=finding, reason=request.POST.get("reason", ""), actor=request.user, source=Source.BROWSER),
            f"finding #{pk} acknowledged")


class SilenceView(_OperatorPost):
    def post(self, request: HttpRequest) -> HttpResponse:
        try:
            hours = float(request.POST.get("hours", "1"))
        except ValueError:
            messages.error(request, "hours: a number")
            return self.back(request)
        node = Node.objects.filter(pk=request.POST.get("node") or 0).first()
        tier = Tier.objects.filter(pk=request.POST.get("tier") or 0).first()
        return self.run(request, lambda: services.silence_create(
            reason=request.POST.get("reason", ""), expires_at=timezone.now() + dt.timedelta(hours=hours),
            actor=request.user, check_name=request.POST.get("check", ""), node=node, tier=tier,
            source=Source.BROWSER), "silenced")
