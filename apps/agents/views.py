"""The enrolment page: nodes asking to join, with the admission rules' verdicts; admins place them
(rack and slot, prefilled from the agent's hint) and approve or reject them in bulk. Viewers read."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.views import View
from django.views.generic import TemplateView
from rest_framework.exceptions import APIException

from apps.agents import enrolments, selectors
from apps.agents.choices import EnrolmentState
from apps.agents.models import Enrolment
from apps.audit.choices import Source
from apps.common.roles import ADMIN, has_role
from apps.common.views import ViewerRequiredMixin
from apps.inventory.models import Rack

PAGE_SIZE = 200


class EnrolmentListView(ViewerRequiredMixin, TemplateView):
    template_name = "agents/enrolments.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        ctx = super().get_context_data(**kwargs)
        state = self.request.GET.get("state", EnrolmentState.PENDING)
        state = state if state in EnrolmentState.values or state == "all" else EnrolmentState.PENDING
        rows = list(selectors.enrolment_list(state="" if state == "all" else state)[:PAGE_SIZE])
        for e in rows:
            e.colour = EnrolmentState.colour_of(e.state)  # type: ignore[attr-defined]
            e.label = EnrolmentState(e.state).label  # type: ignore[attr-defined]
        can_decide = has_role(self.request.user, ADMIN)
        ctx.update(nav="enrolments", enrolments=rows, state=state, states=EnrolmentState.choices,
                   counts=selectors.enrolment_counts(), can_decide=can_decide, racks=list(Rack.objects.all()),
                   tokens=list(selectors.bootstrap_tokens_active()) if can_decide else [])
        return ctx


class EnrolmentDecideView(ViewerRequiredMixin, View):
    """The page's form: approve the selected enrolments where their rack and slot fields say (all or none),
    or reject them with one reason."""

    required_role = ADMIN

    def post(self, request: HttpRequest) -> HttpResponse:
        back = HttpResponseRedirect("/enrolments/")
        ids = [int(i) for i in request.POST.getlist("enrolment") if i.isdigit()]
        chosen = {e.pk: e for e in Enrolment.objects.filter(pk__in=ids)}
        if not chosen:
            messages.error(request, "select the enrolments to decide")
            return back
        picked = [chosen[i] for i in ids if i in chosen]
        try:
            if request.POST.get("action") == "reject":
                done = enrolments.enrolments_reject(enrolments=picked, actor=request.user,
                                                    reason=request.POST.get("reason", ""), source=Source.BROWSER)
                messages.success(request, f"rejected {', '.join(e.hostname for e in done)}")
            else:
                placements = [self._placement(request, e) for e in picked]
                done = enrolments.enrolments_approve(placements=placements, actor=request.user,
                                                     reason=request.POST.get("reason", ""), source=Source.BROWSER)
                messages.success(request, f"approved {', '.join(e.hostname for e in done)}: their agents receive "
                                          "their node keys at their next poll")
        except ValidationError as exc:
            messages.error(request, "nothing decided: " + "; ".join(
                f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items()))
        except APIException as exc:
            messages.error(request, f"nothing decided: {exc.detail}")
        return back

    @staticmethod
    def _placement(request: HttpRequest, e: Enrolment) -> enrolments.Placement:
        rack_name = request.POST.get(f"rack-{e.pk}", "")
        slot = request.POST.get(f"slot-{e.pk}", "").strip()
        rack = Rack.objects.filter(name=rack_name).first() if rack_name else None
        if rack_name and rack is None:
            raise ValidationError({f"{e.hostname} rack": [f"no rack {rack_name}"]})
        if slot and not slot.isdigit():
            raise ValidationError({f"{e.hostname} slot": ["a whole number"]})
        return enrolments.Placement(enrolment=e, rack=rack, slot=int(slot) if slot else None)
