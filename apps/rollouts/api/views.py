"""Entry points of the rollouts API: parse, call one service or selector, render."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from apps.common.permissions import ViewerAll, ViewerReadOperatorWrite
from apps.inventory import scopes
from apps.operations.idempotency import PARAMETER as IDEMPOTENCY
from apps.operations.idempotency import idempotent
from apps.rollouts import selectors, services
from apps.rollouts.api import serializers as s
from apps.rollouts.models import Rollout, RolloutNode

CONTROL_RESULTS = {200: s.RolloutSerializer, 409: s.RolloutConflictSerializer}


def _spec(data: dict[str, Any]) -> services.Spec:
    return services.Spec(
        combination=data["combination"], module_type=data["module_type"], tiers=data.get("tiers") or (),
        racks=data.get("racks") or (), nodes=data.get("nodes") or (), suite=data.get("suite"),
        canary=data["canary"], wave_size=data["wave_size"], max_unavailable=data["max_unavailable"],
        bake_s=data["bake_s"], on_failure=data["on_failure"], max_failures=data["max_failures"],
        cohort_tolerance_pct=data["cohort_tolerance_pct"],
        drain_deadline_s=data["drain_deadline_s"], install_timeout_s=data["install_timeout_s"],
        vectors_timeout_s=data["vectors_timeout_s"], reason=data.get("reason", ""),
        override=data.get("override") or ())


class RolloutViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                     viewsets.GenericViewSet[Rollout]):
    """Driver rollouts: operators start and control them; viewers read and preview."""

    serializer_class = s.RolloutSerializer
    permission_classes = [ViewerReadOperatorWrite]
    filterset_fields = ["state", "module_type", "combination"]
    ordering_fields = ["created_at", "state"]

    def get_queryset(self) -> QuerySet[Rollout]:
        return selectors.rollout_list()

    @extend_schema(request=s.RolloutCreateSerializer, parameters=[IDEMPOTENCY],
                   responses={201: s.RolloutSerializer, 409: s.RolloutConflictSerializer},
                   summary="Start a rollout of a validated combination when every dry-run gate passes, or past "
                           "the failing ones named in override (409 naming the combination's state, the module "
                           "type's active rollout, or the failing gates not overridden)")
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        def run() -> Response:
            ser = s.RolloutCreateSerializer(data=request.data)
            ser.is_valid(raise_exception=True)
            rollout = services.rollout_create(spec=_spec(dict(ser.validated_data)), actor=request.user)
            return Response(s.RolloutSerializer(selectors.rollout_list().get(pk=rollout.pk)).data,
                            status=status.HTTP_201_CREATED)

        return idempotent(request, run)

    @extend_schema(request=s.RolloutInputSerializer, responses={200: s.PreviewSerializer,
                                                                409: s.RolloutConflictSerializer},
                   summary="What a rollout would do, nothing written (so viewers may ask): waves node by node, "
                           "each tier's capacity during each wave against its floor, skipped nodes, the gates as "
                           "a dry run")
    @action(detail=False, methods=["post"], filter_backends=[], pagination_class=None,
            permission_classes=[ViewerAll])
    def preview(self, request: Request) -> Response:
        ser = s.RolloutInputSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        return Response(services.preview(_spec(dict(ser.validated_data))))

    def _control(self, request: Request, pk: Any, act: Callable[..., Rollout]) -> Response:
        def run() -> Response:
            rollout = self.get_object()
            scopes.require_nodes(actor=request.user,
                                 nodes=scopes.nodes_for_check(rollout.nodes.values_list("node_id", flat=True)))
            ser = s.ControlInputSerializer(data=request.data)
            ser.is_valid(raise_exception=True)
            act(rollout=rollout, actor=request.user, reason=ser.validated_data["reason"])
            return Response(s.RolloutSerializer(selectors.rollout_list().get(pk=rollout.pk)).data)

        return idempotent(request, run)

    @extend_schema(request=s.ControlInputSerializer, responses=CONTROL_RESULTS, parameters=[IDEMPOTENCY],
                   summary="Pause: no new node starts; nodes in progress finish their steps")
    @action(detail=True, methods=["post"], filter_backends=[])
    def pause(self, request: Request, pk: Any = None) -> Response:
        return self._control(request, pk, services.rollout_pause)

    @extend_schema(request=s.ControlInputSerializer, responses=CONTROL_RESULTS, parameters=[IDEMPOTENCY],
                   summary="Resume a paused rollout (failed nodes it paused on go back to their versions)")
    @action(detail=True, methods=["post"], filter_backends=[])
    def resume(self, request: Request, pk: Any = None) -> Response:
        return self._control(request, pk, services.rollout_resume)

    @extend_schema(request=s.ControlInputSerializer, responses=CONTROL_RESULTS, parameters=[IDEMPOTENCY],
                   summary="Abort: nodes in progress finish, the rest stay as they are (the fleet left mixed)")
    @action(detail=True, methods=["post"], filter_backends=[])
    def abort(self, request: Request, pk: Any = None) -> Response:
        return self._control(request, pk, services.rollout_abort)

    @extend_schema(request=s.ControlInputSerializer, responses=CONTROL_RESULTS, parameters=[IDEMPOTENCY],
                   summary="Roll back: every upgraded node back to its last-known-good versions")
    @action(detail=True, methods=["post"], filter_backends=[])
    def rollback(self, request: Request, pk: Any = None) -> Response:
        return self._control(request, pk, services.rollout_rollback)

    @extend_schema(responses=s.RolloutNodeSerializer(many=True),
                   summary="Each node's step, what it waits for, its last-known-good versions and times")
    @action(detail=True, methods=["get"], filter_backends=[], serializer_class=s.RolloutNodeSerializer)
    def nodes(self, request: Request, pk: Any = None) -> Response:
        rollout = self.get_object()
        rows: list[RolloutNode] = list(selectors.rollout_nodes(rollout))
        page: Any = self.paginate_queryset(rows)  # type: ignore[arg-type]
        if page is not None:
            return self.get_paginated_response(s.RolloutNodeSerializer(page, many=True).data)
        return Response(s.RolloutNodeSerializer(rows, many=True).data)

    @extend_schema(responses=s.CohortLatencySerializer,
                   summary="The upgraded and the not-yet-upgraded nodes' per-stage p95 and error rate per minute "
                           "(per-node stage rollups), with the newest cohort gate's evidence")
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None,
            serializer_class=s.CohortLatencySerializer)
    def cohorts(self, request: Request, pk: Any = None) -> Response:
        return Response(s.CohortLatencySerializer(selectors.cohort_latency(self.get_object())).data)
