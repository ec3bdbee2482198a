"""API entry points: parse, call one service or selector, render. Actions need
the operator role and honour an ``Idempotency-Key`` header."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.audit.services import snapshot
from apps.common.permissions import IsViewer, ViewerReadOperatorWrite
from apps.inventory.models import Module, Node, Tier
from apps.operations import selectors, services
from apps.operations.api import serializers as s
from apps.operations.filtersets import (
    AutoscalerDecisionFilterSet,
    AutoscalerPolicyFilterSet,
    DrainFilterSet,
    QuarantineFilterSet,
    ScaleRequestFilterSet,
)
from apps.operations.idempotency import HEADER, idempotent
from apps.operations.models import AutoscalerPolicy
from apps.telemetry.authentication import AgentTokenAuthentication
from apps.telemetry.permissions import IsGatewayAgent

IDEMPOTENCY = OpenApiParameter(
    HEADER, OpenApiTypes.STR, OpenApiParameter.HEADER, required=False,
    description="Replays of the same key (same user, same request) return the first reply; the key with another "
                "request is 422.")


def _node_result(node: Node, result: services.Result) -> dict[str, Any]:
    node.refresh_from_db(fields=["state"])
    drain = result.obj
    return {"changed": result.changed, "node": {"id": node.pk, "hostname": node.hostname, "state": node.state},
            "drain": s.DrainSerializer(drain).data if drain is not None else None}


class _NodeAction(APIView):
    permission_classes = [ViewerReadOperatorWrite]
    input_serializer: type[Any] = s.ReleaseInputSerializer
    created_status = status.HTTP_200_OK

    def act(self, node: Node, data: dict[str, Any], actor: Any) -> services.Result:
        raise NotImplementedError

    def handle(self, request: Request, pk: int) -> Response:
        def run() -> Response:
            node = get_object_or_404(Node, pk=pk)
            ser = self.input_serializer(data=request.data)
            ser.is_valid(raise_exception=True)
            result = self.act(node, dict(ser.validated_data), request.user)
            code = self.created_status if result.changed else status.HTTP_200_OK
            return Response(_node_result(node, result), status=code)

        return idempotent(request, run)


def _node_action(name: str, ser: type[Any], created: int, doc: str,
                 act: Callable[[Node, dict[str, Any], Any], services.Result]) -> type[_NodeAction]:
    def post(self: _NodeAction, request: Request, pk: int) -> Response:
        return self.handle(request, pk)

    documented = extend_schema(
        request=ser, responses={200: s.NodeActionResultSerializer, 202: s.NodeActionResultSerializer},
        parameters=[IDEMPOTENCY], description=doc, operation_id=name, tags=["operations"],
    )(post)
    view: type[_NodeAction] = type(name, (_NodeAction,), {
        "input_serializer": ser, "created_status": created, "post": documented,
        "act": lambda self, node, data, actor: act(node, data, actor),
    })
    return view


NodeCordonView = _node_action(
    "node_cordon", s.CordonInputSerializer, status.HTTP_200_OK,
    "Cordon: no new work reaches the node; requests in flight finish. 200 (changed=false) when the same owner "
    "already holds it; 409 when another owner does.",
    lambda node, d, actor: services.node_cordon(node=node, owner=d["owner"], reason=d["reason"], actor=actor,
                                                resume_after=d["resume_after"]))
NodeDrainView = _node_action(
    "node_drain", s.DrainInputSerializer, status.HTTP_202_ACCEPTED,
    "Drain: cordon, then wait for the node to report zero requests in flight (202 when started). At the "
    "deadline the drain stays and alerts, or is forced, as deadline_action says. The same owner draining again "
    "gets the existing drain (200).",
    lambda node, d, actor: services.node_drain(
        node=node, owner=d["owner"], reason=d["reason"], actor=actor, deadline_s=d["deadline_s"],
        deadline_action=d["deadline_action"], resume_after=d["resume_after"], after=d["then"]))
NodeUncordonView = _node_action(
    "node_uncordon", s.ReleaseInputSerializer, status.HTTP_200_OK,
    "Release the node's cordon or drain and put it back to work. Only the hold's owner may, or an operator "
    "with override=true and a reason (audited); otherwise 409 naming the holder.",
    lambda node, d, actor: services.node_uncordon(node=node, owner=d["owner"], reason=d["reason"], actor=actor,
                                                  override=d["override"]))
NodeMaintenanceView = _node_action(
    "node_maintenance_enter", s.MaintenanceInputSerializer, status.HTTP_202_ACCEPTED,
    "Enter maintenance: at once when drained or standby; an active or cordoned node is drained first.",
    lambda node, d, actor: services.node_maintenance_enter(
        node=node, owner=d["owner"], reason=d["reason"], actor=actor, deadline_s=d["deadline_s"],
        deadline_action=d["deadline_action"]))
NodeMaintenanceLeaveView = _node_action(
    "node_maintenance_leave", s.ReleaseInputSerializer, status.HTTP_200_OK,
    "Leave maintenance: back to active (drained into maintenance) or to standby (came from standby).",
    lambda node, d, actor: services.node_maintenance_leave(node=node, owner=d["owner"], reason=d["reason"],
                                                           actor=actor, override=d["override"]))


def _module_result(module: Module, result: services.Result) -> dict[str, Any]:
    module.refresh_from_db(fields=["state"])
    hold = result.obj
    return {"changed": result.changed, "module": {"id": module.pk, "serial": module.serial, "state": module.state},
            "quarantine": s.QuarantineSerializer(hold).data if hold is not None else None}


class ModuleQuarantineView(APIView):
    permission_classes = [ViewerReadOperatorWrite]

    @extend_schema(request=s.OwnedReasonSerializer, responses=s.ModuleActionResultSerializer,
                   parameters=[IDEMPOTENCY], operation_id="module_quarantine", tags=["operations"],
                   description="Quarantine one module: no new work on it while its node serves on its others.")
    def post(self, request: Request, pk: int) -> Response:
        def run() -> Response:
            module = get_object_or_404(Module, pk=pk)
            ser = s.OwnedReasonSerializer(data=request.data)
            ser.is_valid(raise_exception=True)
            result = services.module_quarantine(module=module, owner=ser.validated_data["owner"],
                                                reason=ser.validated_data["reason"], actor=request.user)
            return Response(_module_result(module, result))

        return idempotent(request, run)


class ModuleReleaseView(APIView):
    permission_classes = [ViewerReadOperatorWrite]

    @extend_schema(request=s.ReleaseInputSerializer, responses=s.ModuleActionResultSerializer,
                   parameters=[IDEMPOTENCY], operation_id="module_release", tags=["operations"],
                   description="Release a quarantined module (its owner, or an operator override with a reason).")
    def post(self, request: Request, pk: int) -> Response:
        def run() -> Response:
            module = get_object_or_404(Module, pk=pk)
            ser = s.ReleaseInputSerializer(data=request.data)
            ser.is_valid(raise_exception=True)
            d = ser.validated_data
            result = services.module_release(module=module, owner=d["owner"], reason=d["reason"],
                                             actor=request.user, override=d["override"])
            return Response(_module_result(module, result))

        return idempotent(request, run)


class TierScaleView(APIView):
    permission_classes = [ViewerReadOperatorWrite]

    @extend_schema(request=s.ScaleInputSerializer, responses={200: s.ScaleResultSerializer,
                                                              202: s.ScaleResultSerializer},
                   parameters=[IDEMPOTENCY], operation_id="tier_scale", tags=["operations"],
                   description="Set the tier's desired active node count. Scale-up activates healthy standby nodes "
                               "on the pinned versions, spread over racks within their power budgets; scale-down "
                               "drains the least busy nodes and returns them to standby only when empty. 409 while "
                               "another count is in progress (unless supersede).")
    def post(self, request: Request, pk: int) -> Response:
        def run() -> Response:
            tier = get_object_or_404(Tier, pk=pk)
            ser = s.ScaleInputSerializer(data=request.data)
            ser.is_valid(raise_exception=True)
            d = ser.validated_data
            result = services.tier_scale(tier=tier, desired=d["desired"], actor=request.user, reason=d["reason"],
                                         supersede=d["supersede"], drain_deadline_s=d["drain_deadline_s"])
            sr = selectors.scale_request_list().get(pk=result.obj.pk)
            return Response({"changed": result.changed, "scale_request": s.ScaleRequestSerializer(sr).data},
                            status=status.HTTP_202_ACCEPTED if result.changed else status.HTTP_200_OK)

        return idempotent(request, run)


class SchedulableView(APIView):
    """The gateway's routing view."""

    authentication_classes = [AgentTokenAuthentication, *APIView.authentication_classes]
    permission_classes = [IsGatewayAgent | IsViewer]  # type: ignore[operator]

    @extend_schema(responses=s.SchedulableSerializer, operation_id="schedulable", tags=["operations"],
                   description="Nodes that take new work (active only) and their modules that take work (not "
                               "quarantined or failed), per tier. For viewers and the gateway's Agent key.")
    def get(self, request: Request) -> Response:
        return Response(s.SchedulableSerializer(selectors.schedulable()).data)


class DrainViewSet(viewsets.ReadOnlyModelViewSet):
    """Cordons and drains, with what each waits for."""

    queryset = selectors.drain_list()
    serializer_class = s.DrainSerializer
    filterset_class = DrainFilterSet
    ordering_fields = ["created_at", "deadline"]


class QuarantineViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = selectors.quarantine_list()
    serializer_class = s.QuarantineSerializer
    filterset_class = QuarantineFilterSet


class ScaleRequestViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = selectors.scale_request_list()
    serializer_class = s.ScaleRequestSerializer
    filterset_class = ScaleRequestFilterSet


class AutoscalerDecisionViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = selectors.decision_list()
    serializer_class = s.AutoscalerDecisionSerializer
    filterset_class = AutoscalerDecisionFilterSet


class AutoscalerPolicyViewSet(mixins.CreateModelMixin, mixins.UpdateModelMixin, mixins.DestroyModelMixin,
                              viewsets.ReadOnlyModelViewSet):
    """Per-tier autoscaler policy; operators write."""

    queryset = selectors.policy_list()
    serializer_class = s.AutoscalerPolicySerializer
    filterset_class = AutoscalerPolicyFilterSet
    permission_classes = [ViewerReadOperatorWrite]

    def perform_create(self, serializer: Any) -> None:
        data = dict(serializer.validated_data)
        reason = data.pop("reason", "")
        serializer.instance = services.policy_save(policy=AutoscalerPolicy(**data), actor=self.request.user,
                                                   created=True, reason=reason)

    def perform_update(self, serializer: Any) -> None:
        policy = serializer.instance
        before = snapshot(policy)
        data = dict(serializer.validated_data)
        reason = data.pop("reason", "")
        for key, value in data.items():
            setattr(policy, key, value)
        serializer.instance = services.policy_save(policy=policy, actor=self.request.user, before=before,
                                                   reason=reason)

    def perform_destroy(self, instance: AutoscalerPolicy) -> None:
        services.policy_delete(policy=instance, actor=self.request.user)
