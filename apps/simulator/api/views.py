"""Faults of the simulated fleet: viewers (and the gateway's Agent key) read,
operators switch them on and off."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.agents.authentication import AgentTokenAuthentication
from apps.agents.permissions import IsGatewayAgent
from apps.audit.choices import Source
from apps.common.permissions import ViewerReadOperatorWrite
from apps.simulator import selectors, services
from apps.simulator.api.serializers import FaultPatchSerializer, FaultSerializer, FaultSetSerializer
from apps.simulator.filtersets import FaultFilterSet
from apps.simulator.models import Fault


class FaultPermission(ViewerReadOperatorWrite):
    """Viewers read, operators write; the gateway's Agent key may read (the simulator plays the gateway)."""

    def has_permission(self, request: Any, view: Any) -> bool:
        if request.method in SAFE_METHODS and IsGatewayAgent().has_permission(request, view):
            return True
        return super().has_permission(request, view)


class FaultViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):  # type: ignore[type-arg]
    queryset = selectors.fault_list()
    serializer_class = FaultSerializer
    # Every user credential the API takes (personal and service-account tokens, sessions), and the gateway's key.
    authentication_classes = [*APIView.authentication_classes, AgentTokenAuthentication]
    permission_classes = [FaultPermission]
    # The fleet's state, not the body: no active node or enabled endpoint to pick when none is named, or
    # no such fault to switch off (``errors`` names the field).
    conflicts = {"create": "Nothing to pick: no active node or enabled endpoint when none is named, or no such "
                           "fault to switch off"}
    filterset_class = FaultFilterSet
    ordering_fields = ["kind", "updated_at"]

    @extend_schema(request=FaultSetSerializer, responses={200: FaultSerializer, 201: FaultSerializer})
    def create(self, request: Request) -> Response:
        data = FaultSetSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        existed = Fault.objects.filter(kind=v["kind"], node=v.get("node"), combination=v.get("combination")).exists()
        fault = services.fault_set(kind=v["kind"], enabled=v["enabled"], node=v.get("node"),
                                   combination=v.get("combination"), params=v.get("params"),
                                   actor=request.user, source=Source.API, reason=v["reason"])
        code = status.HTTP_200_OK if existed or not v["enabled"] else status.HTTP_201_CREATED
        return Response(FaultSerializer(fault).data, status=code)

    @extend_schema(request=FaultPatchSerializer, responses={200: FaultSerializer})
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        fault = self.get_object()
        data = FaultPatchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        fault = services.fault_switch(fault=fault, enabled=v.get("enabled", fault.enabled), params=v.get("params"),
                                      actor=request.user, source=Source.API, reason=v["reason"])
        return Response(FaultSerializer(fault).data)
