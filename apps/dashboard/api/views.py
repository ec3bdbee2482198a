"""The dashboard's REST reads: the live snapshot (what the websocket pushes, for a
client that just (re)connected), the Plotly figures of a page for a time range, and
the live parts of a node page."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.common.leases import lease_holders
from apps.common.pages import DEFAULT_MINUTES, TIME_RANGES
from apps.common.permissions import IsViewer
from apps.dashboard import charts, selectors
from apps.inventory.models import Node, Tier

RANGES = [m for m, _ in TIME_RANGES]
MINUTES = OpenApiParameter("minutes", int, enum=RANGES,
                           description=f"Time range of the series in minutes (default {DEFAULT_MINUTES})")


def minutes_from(request: Request) -> int:
    """The time range a client asked for: one of RANGES, or 400 naming ``minutes`` (a page falls back
    to the default instead; a script with a typo must not get another range than it asked for)."""
    raw = request.query_params.get("minutes")
    if raw is None:
        return DEFAULT_MINUTES
    if raw not in {str(m) for m in RANGES}:
        raise ValidationError({"minutes": [f"must be one of {', '.join(map(str, RANGES))} (minutes), not {raw!r}"]})
    return int(raw)


class LiveSnapshotView(APIView):
    """The fleet snapshot the broadcaster pushes each second, computed now."""

    permission_classes = [IsViewer]

    @extend_schema(responses=OpenApiTypes.OBJECT, tags=["dashboard"])
    def get(self, request: Request) -> Response:
        return Response(selectors.live_snapshot())


class FleetFiguresView(APIView):
    """The fleet overview's Plotly figures (queue depth, utilisation, stage latency, breakdown)."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[MINUTES], responses=OpenApiTypes.OBJECT, tags=["dashboard"])
    def get(self, request: Request) -> Response:
        return Response(charts.fleet_figures(minutes=minutes_from(request), snapshot=selectors.live_snapshot()))


class TierFiguresView(APIView):
    """One tier's Plotly figures."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[MINUTES], responses=OpenApiTypes.OBJECT, tags=["dashboard"])
    def get(self, request: Request, pk: int) -> Response:
        tier = get_object_or_404(Tier, pk=pk)
        return Response(charts.tier_figures(tier=tier, minutes=minutes_from(request),
                                            snapshot=selectors.live_snapshot()))


class NodeFiguresView(APIView):
    """One node's Plotly figures (CPU, memory, in flight; modules' utilisation and temperature)."""

    permission_classes = [IsViewer]

    @extend_schema(parameters=[MINUTES], responses=OpenApiTypes.OBJECT, tags=["dashboard"])
    def get(self, request: Request, pk: int) -> Response:
        node = get_object_or_404(Node, pk=pk)
        return Response(charts.node_figures(node=node, minutes=minutes_from(request)))


class NodeLiveView(APIView):
    """A node's state, active hold (with what it waits for) and modules' newest telemetry."""

    permission_classes = [IsViewer]

    @extend_schema(responses=OpenApiTypes.OBJECT, tags=["dashboard"])
    def get(self, request: Request, pk: int) -> Response:
        node = get_object_or_404(Node, pk=pk)
        return Response(selectors.node_live(node=node))


class LeaseListView(APIView):
    """Which process holds each role that runs active/standby (beat, the broadcaster), with its
    fencing token and the seconds left unless it renews; ``holder`` null: nobody holds it (no
    process of that role is running, or the holder died and a standby has not taken over yet)."""

    permission_classes = [IsViewer]

    @extend_schema(tags=["dashboard"], responses=inline_serializer("Lease", many=True, fields={
        "name": serializers.CharField(),
        "holder": serializers.CharField(allow_null=True),
        "fence": serializers.IntegerField(allow_null=True),
        "expires_in_s": serializers.FloatField(allow_null=True),
    }))
    def get(self, request: Request) -> Response:
        return Response([vars(h) for h in lease_holders()])
