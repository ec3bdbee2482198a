"""API entry points: parse, call one service or selector, render. Actions need
the operator role and honour an ``Idempotency-Key`` header."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.agents.authentication import AgentTokenAuthentication
from apps.agents.permissions import IsGatewayAgent
from apps.audit.services import snapshot
from apps.common.errors import MISSING
from apps.common.permissions import AdminOnly, IsViewer, ViewerReadOperatorWrite
from apps.inventory import scopes
from apps.inventory.models import Module, Node, Tier
from apps.operations import lifecycle, scaling, selectors, windows
from apps.operations.api import serializers as s
from apps.operations.filtersets import (
    AutoscalerDecisionFilterSet,
    AutoscalerPolicyFilterSet,
    DrainFilterSet,
    QuarantineFilterSet,
    ScaleRequestFilterSet,
)
from apps.operations.idempotency import PARAMETER as IDEMPOTENCY
from apps.operations.idempotency import idempotent
from apps.operations.models import AutoscalerPolicy, ChangeWindow, Freeze


def _node_result(node: Node, result: lifecycle.Result) -> dict[str, Any]:
    node.refresh_from_db(fields=["state"])
    drain = result.obj
    return {"changed": result.changed, "node": {"id": node.pk, "hostname": node.hostname, "state": node.state},
            "drain": s.DrainSerializer(drain).data if drain is not None else None}


def _module_result(module: Module, result: lifecycle.Result) -> dict[str, Any]:
    module.refresh_from_db(fields=["state"])
    hold = result.obj
    return {"changed": result.changed, "module": {"id": module.pk, "serial": module.serial, "state": module.state},
            "quarantine": s.QuarantineSerializer(hold).data if hold is not None else None}


class NodeActionView(APIView):
    """One lifecycle action on one node: parse the body, call the action, answer the node and its hold.
    Subclasses name their input serializer, the status of a change and the action (``act``)."""

    permission_classes = [ViewerReadOperatorWrite]
    input_serializer: type[s.OwnedInputSerializer] = s.ReleaseInputSerializer
    changed_status: int = status.HTTP_200_OK

    def act(self, node: Node, data: dict[str, Any], actor: Any) -> lifecycle.Result:
        raise NotImplementedError

    def post(self, request: Request, pk: int) -> Response:
        def run() -> Response:
            node = get_object_or_404(Node.objects.select_related("tier", "rack"), pk=pk)
            scopes.require_nodes(actor=request.user, nodes=[node])
            ser = self.input_serializer(data=request.data, context={"request": request})
            ser.is_valid(raise_exception=True)
            result = self.act(node, dict(ser.validated_data), request.user)
            code = self.changed_status if result.changed else status.HTTP_200_OK
            return Response(_node_result(node, result), status=code)

        return idempotent(request, run)


class ModuleActionView(APIView):
    """One lifecycle action on one module."""

    permission_classes = [ViewerReadOperatorWrite]
    input_serializer: type[s.OwnedInputSerializer] = s.ReleaseInputSerializer

    def act(self, module: Module, data: dict[str, Any], actor: Any) -> lifecycle.Result:
        raise NotImplementedError

    def post(self, request: Request, pk: int) -> Response:
        def run() -> Response:
            module = get_object_or_404(Module, pk=pk)
            scopes.require_module(actor=request.user, module=module)
            ser = self.input_serializer(data=request.data, context={"request": request})
            ser.is_valid(raise_exception=True)
            return Response(_module_result(module, self.act(module, dict(ser.validated_data), request.user)))

        return idempotent(request, run)


NODE_RESULTS = {200: s.NodeActionResultSerializer, 202: s.NodeActionResultSerializer,
                409: s.ConflictSerializer}


@extend_schema_view(post=extend_schema(
    request=s.CordonInputSerializer, responses=NODE_RESULTS, parameters=[IDEMPOTENCY], operation_id="node_cordon",
    tags=["operations"],
    description="Cordon: no new work reaches the node; requests in flight finish. 200 (changed=false) when the "
                "same owner already holds it; 409 when another owner does, or when the tier would fall below its "
                "capacity floor (the numbers in `capacity`; an operator may pass override=true with a reason)."))
class NodeCordonView(NodeActionView):
    input_serializer = s.CordonInputSerializer

    def act(self, node: Node, data: dict[str, Any], actor: Any) -> lifecycle.Result:
        return lifecycle.node_cordon(node=node, owner=data["owner"], reason=data["reason"], actor=actor,
                                     resume_after=data["resume_after"], override=data["override"])


@extend_schema_view(post=extend_schema(
    request=s.DrainInputSerializer, responses=NODE_RESULTS, parameters=[IDEMPOTENCY], operation_id="node_drain",
    tags=["operations"],
    description="Drain: cordon, then wait for the node to report zero requests in flight (202 when started). At "
                "the deadline the drain stays and alerts, or is forced, as deadline_action says. The same owner "
                "draining again gets the existing drain (200). 409 below the tier's capacity floor, as for cordon."))
class NodeDrainView(NodeActionView):
    input_serializer = s.DrainInputSerializer
    changed_status = status.HTTP_202_ACCEPTED

    def act(self, node: Node, data: dict[str, Any], actor: Any) -> lifecycle.Result:
        return lifecycle.node_drain(node=node, owner=data["owner"], reason=data["reason"], actor=actor,
                                    deadline_s=data["deadline_s"], deadline_action=data["deadline_action"],
                                    resume_after=data["resume_after"], after=data["then"], override=data["override"])


@extend_schema_view(post=extend_schema(
    request=s.ReleaseInputSerializer, responses=NODE_RESULTS, parameters=[IDEMPOTENCY], operation_id="node_uncordon",
    tags=["operations"],
    description="Release the node's cordon or drain and put it back to work. Only the hold's owner may, or an "
                "operator with override=true and a reason (audited); otherwise 409 naming the holder."))
class NodeUncordonView(NodeActionView):
    input_serializer = s.ReleaseInputSerializer

    def act(self, node: Node, data: dict[str, Any], actor: Any) -> lifecycle.Result:
        return lifecycle.node_uncordon(node=node, owner=data["owner"], reason=data["reason"], actor=actor,
                                       override=data["override"])


@extend_schema_view(post=extend_schema(
    request=s.MaintenanceInputSerializer, responses=NODE_RESULTS, parameters=[IDEMPOTENCY],
    operation_id="node_maintenance_enter", tags=["operations"],
    description="Enter maintenance: at once when drained, standby, failed or unreachable; an active or cordoned "
                "node is drained first (the capacity guard applies)."))
class NodeMaintenanceView(NodeActionView):
    input_serializer = s.MaintenanceInputSerializer
    changed_status = status.HTTP_202_ACCEPTED

    def act(self, node: Node, data: dict[str, Any], actor: Any) -> lifecycle.Result:
        return lifecycle.node_maintenance_enter(node=node, owner=data["owner"], reason=data["reason"], actor=actor,
                                                deadline_s=data["deadline_s"], override=data["override"],
                                                deadline_action=data["deadline_action"])


@extend_schema_view(post=extend_schema(
    request=s.ReleaseInputSerializer, responses=NODE_RESULTS, parameters=[IDEMPOTENCY],
    operation_id="node_maintenance_leave", tags=["operations"],
    description="Leave maintenance: back to active (drained into maintenance) or to standby (otherwise)."))
class NodeMaintenanceLeaveView(NodeActionView):
    input_serializer = s.ReleaseInputSerializer

    def act(self, node: Node, data: dict[str, Any], actor: Any) -> lifecycle.Result:
        return lifecycle.node_maintenance_leave(node=node, owner=data["owner"], reason=data["reason"], actor=actor,
                                                override=data["override"])


@extend_schema_view(post=extend_schema(
    request=s.QuarantineInputSerializer, responses={200: s.ModuleActionResultSerializer, 409: s.ConflictSerializer},
    parameters=[IDEMPOTENCY], operation_id="module_quarantine", tags=["operations"],
    description="Quarantine one module: no new work on it while its node serves on its others. 409 when another "
                "owner holds it or the tier would fall below the modules its traffic needs."))
class ModuleQuarantineView(ModuleActionView):
    input_serializer = s.QuarantineInputSerializer

    def act(self, module: Module, data: dict[str, Any], actor: Any) -> lifecycle.Result:
        return lifecycle.module_quarantine(module=module, owner=data["owner"], reason=data["reason"], actor=actor,
                                           override=data["override"])


@extend_schema_view(post=extend_schema(
    request=s.ReleaseInputSerializer, responses={200: s.ModuleActionResultSerializer, 409: s.ConflictSerializer},
    parameters=[IDEMPOTENCY], operation_id="module_release", tags=["operations"],
    description="Release a quarantined module (its owner, or an operator override with a reason)."))
class ModuleReleaseView(ModuleActionView):
    input_serializer = s.ReleaseInputSerializer

    def act(self, module: Module, data: dict[str, Any], actor: Any) -> lifecycle.Result:
        return lifecycle.module_release(module=module, owner=data["owner"], reason=data["reason"], actor=actor,
                                        override=data["override"])


class TierScaleView(APIView):
    permission_classes = [ViewerReadOperatorWrite]

    @extend_schema(request=s.ScaleInputSerializer, responses={200: s.ScaleResultSerializer,
                                                              202: s.ScaleResultSerializer,
                                                              409: s.ConflictSerializer},
                   parameters=[IDEMPOTENCY], operation_id="tier_scale", tags=["operations"],
                   description="Set the tier's desired active node count. Scale-up activates healthy standby nodes "
                               "on the pinned versions, spread over racks within their power budgets; scale-down "
                               "drains the least busy nodes and returns them to standby only when empty. 409 while "
                               "another count is in progress (unless supersede).")
    def post(self, request: Request, pk: int) -> Response:
        def run() -> Response:
            tier = get_object_or_404(Tier, pk=pk)
            scopes.require_tier(actor=request.user, tier=tier)
            ser = s.ScaleInputSerializer(data=request.data)
            ser.is_valid(raise_exception=True)
            d = ser.validated_data
            result = scaling.tier_scale(tier=tier, desired=d["desired"], actor=request.user, reason=d["reason"],
                                        supersede=d["supersede"], drain_deadline_s=d["drain_deadline_s"],
                                        override=d["override"])
            sr = selectors.scale_request_list().get(pk=result.obj.pk)
            return Response({"changed": result.changed, "scale_request": s.ScaleRequestSerializer(sr).data},
                            status=status.HTTP_202_ACCEPTED if result.changed else status.HTTP_200_OK)

        return idempotent(request, run)


BULK_VIEWS: dict[str, type[NodeActionView]] = {
    "cordon": NodeCordonView, "drain": NodeDrainView, "uncordon": NodeUncordonView,
    "maintenance": NodeMaintenanceView, "maintenance_leave": NodeMaintenanceLeaveView,
}


@extend_schema_view(post=extend_schema(
    request=s.BulkNodeActionInputSerializer, responses={200: s.BulkNodeActionResultSerializer,
                                                        409: s.ConflictSerializer},
    parameters=[IDEMPOTENCY], operation_id="node_bulk_action", tags=["operations"],
    description="One action on many nodes in one request: `action` (cordon, drain, uncordon, maintenance, "
                "maintenance_leave), `nodes` (ids) and the action's own fields as the single action takes them. "
                "Refused whole (403 naming them and the scope) when any node lies outside the caller's scope; "
                "applied through the single actions in one transaction, so a refusal on one node (409) "
                "applies none; one audit record per node changed."))
class NodeBulkActionView(APIView):
    permission_classes = [ViewerReadOperatorWrite]
    body_references = True  # `nodes` are node ids: one no node has is a 404 naming it (the schema's 404)

    def post(self, request: Request) -> Response:
        head = s.BulkNodeActionInputSerializer(data=request.data)
        head.is_valid(raise_exception=True)
        view = BULK_VIEWS[head.validated_data["action"]]
        ids = sorted(set(head.validated_data["nodes"]))

        def run() -> Response:
            nodes = scopes.nodes_for_check(ids)
            missing = sorted(set(ids) - {n.pk for n in nodes})
            if missing:
                raise ValidationError({"nodes": [f"no node with id {', '.join(map(str, missing))}"]}, code=MISSING)
            scopes.require_nodes(actor=request.user, nodes=nodes)
            ser = view.input_serializer(data=request.data, context={"request": request})
            ser.is_valid(raise_exception=True)
            with transaction.atomic():
                results = [_node_result(node, view().act(node, dict(ser.validated_data), request.user))
                           for node in sorted(nodes, key=lambda n: n.pk)]
            return Response({"action": head.validated_data["action"], "results": results})

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
        serializer.instance = scaling.policy_save(policy=AutoscalerPolicy(**data), actor=self.request.user,
                                                   created=True, reason=reason)

    def perform_update(self, serializer: Any) -> None:
        policy = serializer.instance
        before = snapshot(policy)
        data = dict(serializer.validated_data)
        reason = data.pop("reason", "")
        for key, value in data.items():
            setattr(policy, key, value)
        serializer.instance = scaling.policy_save(policy=policy, actor=self.request.user, before=before,
                                                   reason=reason)

    def perform_destroy(self, instance: AutoscalerPolicy) -> None:
        scaling.policy_delete(policy=instance, actor=self.request.user)


@extend_schema_view(post=extend_schema(
    request=s.DecommissionInputSerializer, responses=NODE_RESULTS, parameters=[IDEMPOTENCY],
    operation_id="node_decommission", tags=["operations"],
    description="Decommission (admins): a node that no longer serves (drained, standby, maintenance, failed or "
                "unreachable) has its agent's keys revoked and is retired for good; its history and audit trail "
                "stay, and it is in no count. 409 for a serving node: drain it first. A retired node answers "
                "changed=false."))
class NodeDecommissionView(APIView):
    permission_classes = [AdminOnly]

    def post(self, request: Request, pk: int) -> Response:
        def run() -> Response:
            node = get_object_or_404(Node.objects.select_related("tier", "rack"), pk=pk)
            ser = s.DecommissionInputSerializer(data=request.data)
            ser.is_valid(raise_exception=True)
            result = lifecycle.node_decommission(node=node, reason=ser.validated_data["reason"], actor=request.user)
            return Response(_node_result(node, result))

        return idempotent(request, run)


@extend_schema_view(post=extend_schema(
    request=s.GrayInputSerializer, responses={200: s.GrayResultSerializer, 409: s.ConflictSerializer},
    operation_id="node_gray_pool", tags=["operations"],
    description="Admins put a standby or maintenance node in the gray pool (it validates version combinations and "
                "never serves, never a scale-up candidate) or take it out."))
class NodeGrayView(APIView):
    permission_classes = [AdminOnly]

    def post(self, request: Request, pk: int) -> Response:
        node = get_object_or_404(Node, pk=pk)
        ser = s.GrayInputSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        result = lifecycle.node_gray_set(node=node, gray=ser.validated_data["gray"],
                                         reason=ser.validated_data["reason"], actor=request.user)
        node.refresh_from_db(fields=["state", "gray"])
        return Response({"changed": result.changed, "node": {"id": node.pk, "hostname": node.hostname,
                                                             "state": node.state, "gray": node.gray}})


def _delete_reason(request: Request) -> str:
    """A delete's optional reason (the body's ``reason``), kept in its audit record."""
    data = request.data if isinstance(request.data, dict) else {}
    return str(data.get("reason", ""))[:1000]


class IdempotentCreateMixin:
    """A create that honours ``Idempotency-Key``: a client retrying a POST whose answer it lost gets
    the first answer, not a second object (and a second audit record)."""

    @extend_schema(parameters=[IDEMPOTENCY])
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return idempotent(request, lambda: super(IdempotentCreateMixin, self).create(  # type: ignore[misc]
            request, *args, **kwargs))


class ChangeWindowViewSet(IdempotentCreateMixin, viewsets.ModelViewSet):
    """Change windows: viewers read; admins write (each write audited)."""

    queryset = windows.window_list()
    serializer_class = s.ChangeWindowSerializer
    permission_classes = [IsViewer]

    def perform_create(self, serializer: Any) -> None:
        data = dict(serializer.validated_data)
        reason, tiers, racks = data.pop("reason", ""), data.pop("tiers", []), data.pop("racks", [])
        serializer.instance = windows.window_save(window=ChangeWindow(**data), actor=self.request.user,
                                                  tiers=tiers, racks=racks, reason=reason)

    def perform_update(self, serializer: Any) -> None:
        window = serializer.instance
        data = dict(serializer.validated_data)
        reason, tiers, racks = data.pop("reason", ""), data.pop("tiers", None), data.pop("racks", None)
        for key, value in data.items():
            setattr(window, key, value)
        serializer.instance = windows.window_save(window=window, actor=self.request.user, tiers=tiers, racks=racks,
                                                  reason=reason)

    def perform_destroy(self, instance: ChangeWindow) -> None:
        windows.window_delete(window=instance, actor=self.request.user, reason=_delete_reason(self.request))


class FreezeViewSet(IdempotentCreateMixin, viewsets.ModelViewSet):
    """Freezes: viewers read; admins write (each write audited with the freeze's reason)."""

    queryset = windows.freeze_list()
    serializer_class = s.FreezeSerializer
    permission_classes = [IsViewer]
    conflicts = {action: "`ends_at` is not after `starts_at` (`errors` names it)"
                 for action in ("create", "update", "partial_update")}

    def perform_create(self, serializer: Any) -> None:
        data = dict(serializer.validated_data)
        tiers, racks = data.pop("tiers", []), data.pop("racks", [])
        serializer.instance = windows.freeze_save(freeze=Freeze(**data), actor=self.request.user, tiers=tiers,
                                                  racks=racks)

    def perform_update(self, serializer: Any) -> None:
        freeze = serializer.instance
        data = dict(serializer.validated_data)
        tiers, racks = data.pop("tiers", None), data.pop("racks", None)
        for key, value in data.items():
            setattr(freeze, key, value)
        serializer.instance = windows.freeze_save(freeze=freeze, actor=self.request.user, tiers=tiers, racks=racks)

    def perform_destroy(self, instance: Freeze) -> None:
        windows.freeze_delete(freeze=instance, actor=self.request.user, reason=_delete_reason(self.request))
