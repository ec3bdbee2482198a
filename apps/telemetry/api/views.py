"""Entry points of the telemetry API: parse, call one service or selector, render."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, viewsets
from rest_framework.authentication import SessionAuthentication
from rest_framework.decorators import action
from rest_framework.exceptions import AuthenticationFailed, ValidationError
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.common.authentication import TokenAuthentication
from apps.common.metrics import ingest_answered
from apps.common.permissions import AdminOnly, IsViewer, ViewerReadOperatorWrite
from apps.inventory import scopes
from apps.inventory.choices import TierKind
from apps.inventory.models import Node, Tier
from apps.telemetry import selectors, services
from apps.telemetry.api.responses import accepted, rejection
from apps.telemetry.api.serializers import (
    AgentCommandSerializer,
    AgentSelfSerializer,
    AgentTokenIssueSerializer,
    AgentTokenKeySerializer,
    AgentTokenRotateSerializer,
    AgentTokenSerializer,
    CommandAckSerializer,
    FleetSnapshotSerializer,
    IngestResultSerializer,
    LatencyPercentilesSerializer,
    NodeCommandSerializer,
    NodeHistorySerializer,
    QueueDepthSeriesSerializer,
    StageLatencySeriesSerializer,
    TelemetryBatchIn,
    TelemetryRejectionSerializer,
)
from apps.telemetry.authentication import AgentTokenAuthentication, agent_key
from apps.telemetry.filtersets import NodeCommandFilterSet
from apps.telemetry.models import AgentToken, NodeCommand
from apps.telemetry.permissions import IsAgent, IsNodeAgent, agent_token
from apps.telemetry.validation import BatchRejected

# User credentials are recognised too, so a user calling an agent endpoint gets 403, not 401.
AGENT_AUTH = [AgentTokenAuthentication, TokenAuthentication, SessionAuthentication]


def _token(request: Request) -> AgentToken:
    token = agent_token(request)
    assert token is not None  # guaranteed by the permission classes
    return token


class TelemetryIngestView(APIView):
    """A batch of telemetry from a node agent (its own node's samples) or the gateway
    (tier and stage samples). Validated whole; 202 means it is durably accepted and
    will be stored exactly once (within about a second), 200 that it was already.

    Under the ASGI server, agents' requests take the lean path in
    ``apps/telemetry/api/asgi.py``; this view answers the same way (it runs the
    same service) for other callers and documents the endpoint."""

    authentication_classes = AGENT_AUTH
    permission_classes = [IsAgent]

    @extend_schema(
        request=TelemetryBatchIn,
        responses={
            202: IngestResultSerializer,
            200: OpenApiResponse(IngestResultSerializer, description="a resent batch id: nothing written"),
            400: OpenApiResponse(TelemetryRejectionSerializer,
                                 description='errors by path, e.g. {"node_samples[3].cpu_util": [msg]}; an unknown '
                                             'contract version also lists "contract_versions"'),
            403: OpenApiResponse(description="a sample this key may not write, or a caller that is not an agent"),
            413: OpenApiResponse(description="body or batch too large"),
            429: OpenApiResponse(description="over the key's TELEMETRY_RATE; Retry-After says when to send again"),
        },
    )
    def post(self, request: Request) -> Response:
        identity = services.agent_identity(key=agent_key(request))
        if identity is None or identity.token_id != _token(request).pk:
            raise AuthenticationFailed("unknown or revoked agent key")
        refusal = services.telemetry_rate_refusal(identity)
        if refusal is not None:
            ingest_answered(429, refusal[0])
            return Response(refusal[0], status=429, headers={"Retry-After": str(refusal[1])})
        try:
            code, data = accepted(services.telemetry_receive(identity=identity, body=request.body))
        except BatchRejected as exc:
            code, data = rejection(exc)
        ingest_answered(code, data)
        return Response(data, status=code)


class AgentSelfView(APIView):
    """The calling node agent's own node and the modules in its slots, so an agent
    needs no local list of module serials."""

    authentication_classes = AGENT_AUTH
    permission_classes = [IsNodeAgent]

    @extend_schema(responses=AgentSelfSerializer)
    def get(self, request: Request) -> Response:
        node = _token(request).node
        assert node is not None
        return Response(AgentSelfSerializer(selectors.agent_self(node=node)).data)


class AgentCommandsView(APIView):
    """Pending commands for the calling node agent, oldest first; they become
    delivered. With ``wait`` the call long-polls up to that many seconds."""

    authentication_classes = AGENT_AUTH
    permission_classes = [IsNodeAgent]
    MAX_WAIT_S = 25

    @extend_schema(
        parameters=[OpenApiParameter("wait", int, description="Seconds to wait for a command, 0-25 (default 0)")],
        responses=AgentCommandSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        raw = request.query_params.get("wait", "0")
        try:
            wait = float(raw)
        except ValueError:
            raise ValidationError({"wait": ["must be a number of seconds, 0-25"]}) from None
        if not 0 <= wait <= self.MAX_WAIT_S:
            raise ValidationError({"wait": ["must be a number of seconds, 0-25"]})
        node = _token(request).node
        assert node is not None
        commands = services.node_commands_wait(node=node, wait_s=wait)
        return Response(AgentCommandSerializer(commands, many=True).data)


class AgentCommandAckView(APIView):
    """The agent's answer to a command. The same answer twice is harmless."""

    authentication_classes = AGENT_AUTH
    permission_classes = [IsNodeAgent]
    conflicts = {"post": "Another answer to a command that has finished already"}

    @extend_schema(request=CommandAckSerializer, responses=NodeCommandSerializer)
    def post(self, request: Request, pk: int) -> Response:
        node = _token(request).node
        assert node is not None
        if not NodeCommand.objects.filter(node=node, pk=pk).exists():  # another node's command: none, whatever
            raise Http404("no such command for this node")            # the body says
        ser = CommandAckSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        result = ser.validated_data.get("result") or {}
        if not isinstance(result, dict):
            raise ValidationError({"result": ["must be a JSON object"]})
        try:
            command = services.node_command_ack(node=node, command_id=pk, status=ser.validated_data["status"],
                                                result=result)
        except NodeCommand.DoesNotExist:
            raise Http404("no such command for this node") from None
        return Response(NodeCommandSerializer(command).data)


class NodeCommandViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                         viewsets.GenericViewSet):
    """Commands sent to node agents. Operators send; viewers read."""

    queryset = NodeCommand.objects.select_related("node").order_by("-created_at", "-id")
    serializer_class = NodeCommandSerializer
    permission_classes = [ViewerReadOperatorWrite]
    filterset_class = NodeCommandFilterSet
    search_fields = ["kind", "node__hostname"]
    ordering_fields = ["created_at", "state"]

    def perform_create(self, serializer: Any) -> None:
        data = serializer.validated_data
        scopes.require_nodes(actor=self.request.user, nodes=scopes.nodes_for_check([data["node"].pk]))
        serializer.instance = services.node_command_send(
            node=data["node"], kind=data["kind"], args=data.get("args") or {}, actor=self.request.user,
            reason=data.get("reason", ""), expires_at=data.get("expires_at"),
        )


@extend_schema(tags=["agent keys"])
class AgentTokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Keys of node agents and the gateway (admins only). Only a key's hash is stored: a key is shown once,
    in the answer that issues it. Rotation issues the replacement and lets the old key work for an overlap
    window, then refuses it; revocation refuses a key at once."""

    queryset = AgentToken.objects.select_related("node").order_by("-created_at", "-id")
    serializer_class = AgentTokenSerializer
    permission_classes = [AdminOnly]
    filterset_fields = ["kind", "node"]
    search_fields = ["node__hostname", "key_prefix", "note"]

    @extend_schema(request=AgentTokenIssueSerializer, responses={201: AgentTokenKeySerializer},
                   operation_id="agent_token_issue")
    def create(self, request: Request) -> Response:
        ser = AgentTokenIssueSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        token, key = services.agent_token_issue(kind=ser.validated_data["kind"], node=ser.validated_data.get("node"),
                                                actor=request.user, note=ser.validated_data["note"])
        return Response(AgentTokenKeySerializer({"token": token, "key": key, "replaces": None}).data, status=201)

    @extend_schema(request=AgentTokenRotateSerializer, responses={201: AgentTokenKeySerializer,
                                                                 409: OpenApiResponse(description="revoked, expired "
                                                                                      "or already rotated")},
                   operation_id="agent_token_rotate")
    @action(detail=True, methods=["post"])
    def rotate(self, request: Request, pk: str) -> Response:
        ser = AgentTokenRotateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        old = self.get_object()
        new, key = services.agent_token_rotate(token=old, overlap_s=ser.validated_data["overlap_s"],
                                               note=ser.validated_data["note"], actor=request.user)
        old.refresh_from_db()
        return Response(AgentTokenKeySerializer({"token": new, "key": key, "replaces": old}).data, status=201)

    @extend_schema(request=None, responses={200: AgentTokenSerializer}, operation_id="agent_token_revoke")
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str) -> Response:
        token = services.agent_token_revoke(token=self.get_object(), actor=request.user)
        return Response(AgentTokenSerializer(token).data)


# ---- fleet: snapshot and series (rollups + latest state) ------------------------------------

MAX_MINUTES = 7 * 24 * 60
MINUTES = OpenApiParameter("minutes", int, description=f"Window in minutes, 1-{MAX_MINUTES}")
TIER = OpenApiParameter("tier", str, enum=TierKind.values, description="One tier (default: every tier)")


def _minutes(request: Request, default: int) -> int:
    raw = request.query_params.get("minutes", str(default))
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_MINUTES:
        raise ValidationError({"minutes": [f"must be a whole number of minutes, 1-{MAX_MINUTES}"]})
    return value


def _tier(request: Request) -> Tier | None:
    kind = request.query_params.get("tier")
    if not kind:
        return None
    tier = Tier.objects.filter(kind=kind).first()
    if tier is None:
        raise ValidationError({"tier": [f"must be one of {', '.join(TierKind.values)}"]})
    return tier


NODES = OpenApiParameter("nodes", bool, description="Add one row per node (node_fields names the columns)")


class FleetSnapshotView(APIView):
    """The fleet snapshot (the same one the live dashboard's websocket pushes): per tier, node counts by
    state, the latest CPU and module utilisation, queue depth, request rate and stage latency, and the
    same figures over the last ``minutes`` of rollups (default 15) under ``window``."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[MINUTES, NODES], responses=FleetSnapshotSerializer)
    def get(self, request: Request) -> Response:
        nodes = request.query_params.get("nodes", "").lower() in {"1", "true", "yes"}
        data = selectors.fleet_snapshot(window_minutes=_minutes(request, 15), nodes=nodes)
        return Response(FleetSnapshotSerializer(data).data)


class QueueDepthSeriesView(APIView):
    """Queue depth and arrival/completion rates per tier (default 60 minutes): a point per minute up to
    6 h, longer ranges merged into bins of ``step_minutes`` in SQL."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[TIER, MINUTES], responses=QueueDepthSeriesSerializer)
    def get(self, request: Request) -> Response:
        # The selector's values are the response as is (the serializer describes it for the schema;
        # a test compares the two): up to 360 points per tier, not worth a serializer call per field.
        return Response(selectors.queue_depth_series(tier=_tier(request), minutes=_minutes(request, 60)))


class StageLatencySeriesView(APIView):
    """Latency (count, p50, p95, p99, max) of the six stages per tier (default 60 minutes): a point per
    minute up to 6 h, longer ranges merged into bins of ``step_minutes`` in SQL."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[TIER, MINUTES], responses=StageLatencySeriesSerializer)
    def get(self, request: Request) -> Response:
        # As above: up to 6 x 360 points per tier, returned as the selector reads them.
        return Response(selectors.stage_latency_series(tier=_tier(request), minutes=_minutes(request, 60)))


NODE = OpenApiParameter("node", int, description="One node's id (instead of tier)")


class LatencyPercentilesView(APIView):
    """Stage latency percentiles (count, p50, p95, p99, max) of the fleet, one tier (``tier``) or one node
    (``node``) over the last ``minutes`` (default 60), from the nodes' log-bucket histograms merged in
    SQL: each within 1 % of the exact percentile of every latency in the range."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[TIER, NODE, MINUTES], responses=LatencyPercentilesSerializer)
    def get(self, request: Request) -> Response:
        tier, raw_node, node = _tier(request), request.query_params.get("node"), None
        if raw_node:
            if tier is not None:
                raise ValidationError({"node": ["give tier or node, not both"]})
            if raw_node.isdigit() and len(raw_node) <= 18:
                node = Node.objects.filter(pk=int(raw_node)).first()
            if node is None:
                raise ValidationError({"node": [f"no node with id {raw_node}"]})
        data = selectors.latency_window(minutes=_minutes(request, 60), tier=tier, node=node)
        return Response(LatencyPercentilesSerializer(data).data)


class NodeHistoryView(APIView):
    """A node's per-minute history and latest state, with its modules' (default 60 minutes)."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[MINUTES], responses=NodeHistorySerializer)
    def get(self, request: Request, pk: int) -> Response:
        node = get_object_or_404(Node.objects.select_related("tier"), pk=pk)
        data = selectors.node_history(node=node, minutes=_minutes(request, 60))
        return Response(NodeHistorySerializer(data).data)
