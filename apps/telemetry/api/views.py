"""Entry points of the telemetry API: parse, call one service or selector, render."""

from __future__ import annotations

import re

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import AuthenticationFailed, NotFound, ValidationError
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.agents import services as agent_services
from apps.agents.authentication import AGENT_AUTH, agent_key
from apps.agents.permissions import IsAgent, agent_token_of
from apps.common.metrics import ingest_answered
from apps.common.permissions import IsViewer
from apps.inventory.choices import TierKind
from apps.inventory.models import Node, Tier
from apps.telemetry.api.serializers import (
    FleetSnapshotSerializer,
    IngestResultSerializer,
    LatencyPercentilesSerializer,
    NodeHistorySerializer,
    QueueDepthSeriesSerializer,
    StageLatencySeriesSerializer,
    TelemetryBatchIn,
    TelemetryRejectionSerializer,
)
from apps.telemetry.batch import BatchRejected
from apps.telemetry.ingest import receive
from apps.telemetry.ingest.responses import accepted, rejection
from apps.telemetry.selectors.latency import latency_window
from apps.telemetry.selectors.series import node_history, queue_depth_series_json, stage_latency_series_json
from apps.telemetry.selectors.snapshot import fleet_snapshot


class TelemetryIngestView(APIView):
    """A batch of telemetry from a node agent (its own node's samples) or the gateway
    (tier and stage samples). Validated whole; 202 means it is durably accepted and
    will be stored exactly once (within about a second), 200 that it was already.

    Under the ASGI server, agents' requests take the lean path in
    ``apps/telemetry/ingest/asgi.py``; this view answers the same way (it runs the
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
        identity = agent_services.agent_identity(key=agent_key(request))
        if identity is None or identity.token_id != agent_token_of(request).pk:
            raise AuthenticationFailed("unknown or revoked agent key")
        refusal = receive.telemetry_rate_refusal(identity)
        if refusal is not None:
            ingest_answered(429, refusal[0])
            return Response(refusal[0], status=429, headers={"Retry-After": str(refusal[1])})
        try:
            code, data = accepted(receive.telemetry_receive(identity=identity, body=request.body))
        except BatchRejected as exc:
            code, data = rejection(exc)
        ingest_answered(code, data)
        return Response(data, status=code)


# ---- fleet: snapshot and series (rollups + latest state) ------------------------------------

MAX_MINUTES = 7 * 24 * 60
MINUTES = OpenApiParameter("minutes", {"type": "integer", "minimum": 1, "maximum": MAX_MINUTES},
                           description=f"Window in minutes, 1-{MAX_MINUTES}")
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
    if kind is None:  # left out: every tier (an empty value is not one of the schema's kinds)
        return None
    tier = Tier.objects.filter(kind=kind).first()
    if tier is None:
        raise ValidationError({"tier": [f"must be one of {', '.join(TierKind.values)}"]})
    return tier


def _json(body: bytes) -> HttpResponse:
    return HttpResponse(body, content_type="application/json")


NODES = OpenApiParameter("nodes", bool, description="Add one row per node (node_fields names the columns)")


class FleetSnapshotView(APIView):
    """The fleet snapshot (the same one the live dashboard's websocket pushes): per tier, node counts by
    state, the latest CPU and module utilisation, queue depth, request rate and stage latency, and the
    same figures over the last ``minutes`` of rollups (default 15) under ``window``."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[MINUTES, NODES], responses=FleetSnapshotSerializer)
    def get(self, request: Request) -> Response:
        nodes = request.query_params.get("nodes", "false").lower()
        if nodes not in {"true", "false"}:
            raise ValidationError({"nodes": ["must be true or false"]})
        data = fleet_snapshot(window_minutes=_minutes(request, 15), nodes=nodes == "true")
        return Response(FleetSnapshotSerializer(data).data)


class QueueDepthSeriesView(APIView):
    """Queue depth and arrival/completion rates per tier (default 60 minutes): a point per minute up to
    6 h, longer ranges merged into bins of ``step_minutes`` in SQL."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[TIER, MINUTES], responses=QueueDepthSeriesSerializer)
    def get(self, request: Request) -> HttpResponse:
        # The selector's JSON is the response as is, its points written by PostgreSQL (the serializer
        # describes it for the schema; a test compares the two): up to 360 points per tier.
        return _json(queue_depth_series_json(tier=_tier(request), minutes=_minutes(request, 60)))


class StageLatencySeriesView(APIView):
    """Latency (count, p50, p95, p99, max) of the six stages per tier (default 60 minutes): a point per
    minute up to 6 h, longer ranges merged into bins of ``step_minutes`` in SQL."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[TIER, MINUTES], responses=StageLatencySeriesSerializer)
    def get(self, request: Request) -> HttpResponse:
        # As above: up to 6 x 360 points per tier, as PostgreSQL writes them.
        return _json(stage_latency_series_json(tier=_tier(request), minutes=_minutes(request, 60)))


NODE = OpenApiParameter("node", int,
                        description="One node's id; with tier, a node of that tier (404 if it is in another)")


class LatencyPercentilesView(APIView):
    """Stage latency percentiles (count, p50, p95, p99, max) of the fleet, one tier (``tier``) or one node
    (``node``; with ``tier`` too, the node must be in that tier, else 404) over the last ``minutes``
    (default 60), from the nodes' log-bucket histograms merged in
    SQL: each within 1 % of the exact percentile of every latency in the range."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[TIER, NODE, MINUTES],
                   responses={200: LatencyPercentilesSerializer,
                              404: OpenApiResponse(description="No such node (in the tier, when tier is given)")})
    def get(self, request: Request) -> Response:
        tier, raw_node, node = _tier(request), request.query_params.get("node"), None
        if raw_node is not None:
            if not re.fullmatch(r"-?\d+", raw_node):
                raise ValidationError({"node": [f"must be a node's id (a whole number), not {raw_node[:40]!r}"]})
            nodes = Node.objects.filter(pk=int(raw_node))
            node = (nodes.filter(tier=tier) if tier is not None else nodes).first()
            if node is None:  # a well-formed id, as the schema types it: the object it names is missing
                raise NotFound(f"node: no node with id {raw_node}" + (f" in tier {tier.kind}" if tier else ""))
            tier = None  # the node's figures: its tier only narrowed the lookup
        data = latency_window(minutes=_minutes(request, 60), tier=tier, node=node)
        return Response(LatencyPercentilesSerializer(data).data)


class NodeHistoryView(APIView):
    """A node's per-minute history and latest state, with its modules' (default 60 minutes)."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[MINUTES], responses=NodeHistorySerializer)
    def get(self, request: Request, pk: int) -> Response:
        node = get_object_or_404(Node.objects.select_related("tier"), pk=pk)
        data = node_history(node=node, minutes=_minutes(request, 60))
        return Response(NodeHistorySerializer(data).data)
