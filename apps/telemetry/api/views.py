"""Entry points of the telemetry API: parse, call one service or selector, render."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.common.authentication import TokenAuthentication
from apps.common.permissions import IsViewer, ViewerReadOperatorWrite
from apps.inventory.choices import TierKind
from apps.inventory.models import Node, Tier
from apps.telemetry import selectors, services
from apps.telemetry.api.serializers import (
    AgentCommandSerializer,
    AgentSelfSerializer,
    CommandAckSerializer,
    FleetSnapshotSerializer,
    IngestResultSerializer,
    NodeCommandSerializer,
    NodeHistorySerializer,
    QueueDepthSeriesSerializer,
    StageLatencySeriesSerializer,
    TelemetryBatchIn,
)
from apps.telemetry.authentication import AgentTokenAuthentication
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


def _rejected(exc: BatchRejected) -> Response:
    if exc.status == status.HTTP_400_BAD_REQUEST:
        raise ValidationError(exc.errors)
    parts = [f"{path}: {m}" for path, messages in exc.errors.items() for m in messages]
    return Response({"detail": "; ".join(parts[:5]), "errors": exc.errors}, status=exc.status)


class TelemetryIngestView(APIView):
    """A batch of telemetry from a node agent (its own node's samples) or the gateway
    (tier and stage samples). Validated whole, written in one transaction or not at all."""

    authentication_classes = AGENT_AUTH
    permission_classes = [IsAgent]

    @extend_schema(
        request=TelemetryBatchIn,
        responses={
            202: IngestResultSerializer,
            200: OpenApiResponse(IngestResultSerializer, description="a resent batch id: nothing written"),
            400: OpenApiResponse(description='{"detail", "errors": {"node_samples[3].cpu_util": [msg]}}'),
            403: OpenApiResponse(description="a sample this key may not write"),
            413: OpenApiResponse(description="body or batch too large"),
        },
    )
    def post(self, request: Request) -> Response:
        try:
            result = services.telemetry_ingest(token=_token(request), payload=request.data)
        except BatchRejected as exc:
            return _rejected(exc)
        return Response(result.as_dict(), status=status.HTTP_200_OK if result.duplicate else status.HTTP_202_ACCEPTED)


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

    @extend_schema(request=CommandAckSerializer, responses=NodeCommandSerializer)
    def post(self, request: Request, pk: int) -> Response:
        ser = CommandAckSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        node = _token(request).node
        assert node is not None
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
        serializer.instance = services.node_command_send(
            node=data["node"], kind=data["kind"], args=data.get("args") or {}, actor=self.request.user,
            reason=data.get("reason", ""), expires_at=data.get("expires_at"),
        )


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


class FleetSnapshotView(APIView):
    """Per tier: nodes by state, CPU and module utilisation, queue depth, request
    rate and per-stage latency over the last ``minutes`` (default 15)."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[MINUTES], responses=FleetSnapshotSerializer)
    def get(self, request: Request) -> Response:
        data = selectors.fleet_snapshot(minutes=_minutes(request, 15))
        return Response(FleetSnapshotSerializer(data).data)


class QueueDepthSeriesView(APIView):
    """Per-minute queue depth and arrival/completion rates per tier (default 60 minutes)."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[TIER, MINUTES], responses=QueueDepthSeriesSerializer)
    def get(self, request: Request) -> Response:
        data = selectors.queue_depth_series(tier=_tier(request), minutes=_minutes(request, 60))
        return Response(QueueDepthSeriesSerializer(data).data)


class StageLatencySeriesView(APIView):
    """Per-minute latency (count, p50, p95, p99, max) of the six stages per tier (default 60 minutes)."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[TIER, MINUTES], responses=StageLatencySeriesSerializer)
    def get(self, request: Request) -> Response:
        data = selectors.stage_latency_series(tier=_tier(request), minutes=_minutes(request, 60))
        return Response(StageLatencySeriesSerializer(data).data)


class NodeHistoryView(APIView):
    """A node's per-minute history and latest state, with its modules' (default 60 minutes)."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[MINUTES], responses=NodeHistorySerializer)
    def get(self, request: Request, pk: int) -> Response:
        node = get_object_or_404(Node.objects.select_related("tier"), pk=pk)
        data = selectors.node_history(node=node, minutes=_minutes(request, 60))
        return Response(NodeHistorySerializer(data).data)
