"""API entry points of health: parse, call one service or selector, render."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.common.permissions import IsViewer, ViewerReadOperatorWrite
from apps.health import selectors, services
from apps.health.api import serializers as s
from apps.health.checks import CHECKS
from apps.health.filtersets import FindingFilterSet
from apps.health.models import Finding, Silence
from apps.operations.api.serializers import ConflictSerializer


def _check_data(name: str, cfg: selectors.CheckConfig) -> dict[str, Any]:
    spec = CHECKS[name]
    return {"name": name, "title": spec.title, "subject": spec.subject, "evidence": spec.evidence,
            "severity": spec.severity, "capability": spec.capability, "defaults": spec.defaults,
            "params": cfg.params, "policy": cfg.policy, "enabled": cfg.enabled, "raise_n": cfg.raise_n,
            "raise_m": cfg.raise_m, "clear_k": cfg.clear_k}


@extend_schema(tags=["health"])
class CheckListView(APIView):
    permission_classes = [IsViewer]

    @extend_schema(responses=s.CheckSerializer(many=True), operation_id="health_checks_list",
                   description="Every health check: what it reads, its parameters (defaults and now), its policy "
                               "(observe, alert, act) and its hysteresis (raise on N of M failing, clear after K "
                               "passes).")
    def get(self, request: Request) -> Response:
        return Response([_check_data(n, c) for n, c in selectors.check_configs().items()])


CHECK_NAME = OpenApiParameter("name", OpenApiTypes.STR, OpenApiParameter.PATH, enum=list(CHECKS))


@extend_schema(tags=["health"], parameters=[CHECK_NAME])
class CheckDetailView(APIView):
    permission_classes = [IsViewer]  # reads for viewers, PATCH for admins

    @extend_schema(responses=s.CheckSerializer, operation_id="health_checks_retrieve")
    def get(self, request: Request, name: str) -> Response:
        if name not in CHECKS:
            return Response({"detail": f"no check {name!r}"}, status=404)
        return Response(_check_data(name, selectors.check_configs()[name]))

    @extend_schema(request=s.CheckPatchSerializer, responses=s.CheckSerializer, operation_id="health_checks_update",
                   description="Admins: change parameters (merged over the current ones), policy, hysteresis or "
                               "switch a check off. 400 names the field, e.g. `params.window_min`.")
    def patch(self, request: Request, name: str) -> Response:
        if name not in CHECKS:
            return Response({"detail": f"no check {name!r}"}, status=404)
        ser = s.CheckPatchSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        services.check_update(name=name, actor=request.user, **ser.validated_data)
        return Response(_check_data(name, selectors.check_configs()[name]))


@extend_schema_view(
    list=extend_schema(tags=["health"], description="Findings, newest first. Filters: state, severity, check, "
                                                    "tier, node, since."),
    retrieve=extend_schema(tags=["health"]),
)
class FindingViewSet(viewsets.ReadOnlyModelViewSet[Finding]):
    permission_classes = [ViewerReadOperatorWrite]
    serializer_class = s.FindingSerializer
    filterset_class = FindingFilterSet
    queryset = Finding.objects.select_related("node", "module", "tier").order_by("-last_seen", "-id")

    @extend_schema(tags=["health"], request=s.AcknowledgeSerializer, responses={200: s.FindingSerializer,
                                                                                409: ConflictSerializer},
                   description="Operators: someone is on it (open → acknowledged) with a reason. 409 when resolved.")
    @action(detail=True, methods=["post"])
    def acknowledge(self, request: Request, pk: int) -> Response:
        finding = get_object_or_404(Finding, pk=pk)
        ser = s.AcknowledgeSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        f = services.finding_acknowledge(finding=finding, reason=ser.validated_data["reason"], actor=request.user)
        return Response(s.FindingSerializer(Finding.objects.select_related("node", "module", "tier").get(
            pk=f.pk)).data)

    @extend_schema(tags=["health"], request=s.BreakerResetSerializer, responses={200: s.FindingSerializer,
                                                                                409: ConflictSerializer},
                   description="Admins: reset a tripped circuit breaker (a `breaker` finding), with a reason. "
                               "A breaker never resets by itself; health acts on the tier again from its next "
                               "sweep, which trips it again if the tier still fails that much. Resetting one "
                               "already reset changes nothing; 409 on a finding of another check.")
    @action(detail=True, methods=["post"], url_path="reset-breaker", permission_classes=[IsViewer])
    def reset_breaker(self, request: Request, pk: int) -> Response:
        finding = get_object_or_404(Finding, pk=pk)
        ser = s.BreakerResetSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        f, _ = services.breaker_reset(finding=finding, reason=ser.validated_data["reason"], actor=request.user)
        return Response(s.FindingSerializer(Finding.objects.select_related("node", "module", "tier").get(
            pk=f.pk)).data)


@extend_schema_view(
    list=extend_schema(tags=["health"]),
    create=extend_schema(tags=["health"], description="Operators: silence a check (or every check) on a node, a "
                                                      "tier or the fleet until expires_at, with a reason."),
)
class SilenceViewSet(mixins.ListModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet[Silence]):
    permission_classes = [ViewerReadOperatorWrite]
    conflicts = {"create": "`expires_at` is not in the future (`errors` names it)"}
    serializer_class = s.SilenceSerializer
    queryset = Silence.objects.select_related("node", "tier").order_by("-created_at")

    def perform_create(self, serializer: Any) -> None:
        d = serializer.validated_data
        serializer.instance = services.silence_create(
            reason=d["reason"], expires_at=d["expires_at"], actor=self.request.user, check_name=d.get("check_name", ""),
            node=d.get("node"), tier=d.get("tier"))

