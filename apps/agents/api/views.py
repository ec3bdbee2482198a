"""Entry points of the agents API: an agent's own node, its commands and their answers;
operators' commands and admins' agent keys. Parse, call one service or selector, render."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.agents import selectors, services
from apps.agents.api.serializers import (
    AgentCommandSerializer,
    AgentSelfSerializer,
    AgentTokenIssueSerializer,
    AgentTokenKeySerializer,
    AgentTokenRotateSerializer,
    AgentTokenSerializer,
    CommandAckSerializer,
    NodeCommandSerializer,
)
from apps.agents.authentication import AGENT_AUTH
from apps.agents.filtersets import NodeCommandFilterSet
from apps.agents.models import AgentToken, NodeCommand
from apps.agents.permissions import IsNodeAgent, agent_token_of
from apps.common.permissions import AdminOnly, ViewerReadOperatorWrite
from apps.inventory import scopes


class AgentSelfView(APIView):
    """The calling node agent's own node and the modules in its slots, so an agent
    needs no local list of module serials."""

    authentication_classes = AGENT_AUTH
    permission_classes = [IsNodeAgent]

    @extend_schema(responses=AgentSelfSerializer)
    def get(self, request: Request) -> Response:
        node = agent_token_of(request).node
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
        node = agent_token_of(request).node
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
        node = agent_token_of(request).node
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
