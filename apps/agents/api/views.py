"""Entry points of the agents API: an agent's own node, its commands and their answers;
operators' commands and admins' agent keys; bootstrap tokens, joins and their approval. Parse, call one
service or selector, render."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.agents import enrolments, selectors, services
from apps.agents.api.serializers import (
    AgentCommandSerializer,
    AgentSelfSerializer,
    AgentTokenIssueSerializer,
    AgentTokenKeySerializer,
    AgentTokenRotateSerializer,
    AgentTokenSerializer,
    ApproveSerializer,
    BootstrapTokenIssueSerializer,
    BootstrapTokenKeySerializer,
    BootstrapTokenSerializer,
    BulkApproveSerializer,
    BulkRejectSerializer,
    ClaimAnswerSerializer,
    ClaimSerializer,
    CommandAckSerializer,
    EnrolmentSerializer,
    JoinAnswerSerializer,
    JoinSerializer,
    NodeCommandSerializer,
    RejectSerializer,
    RevokeSerializer,
)
from apps.agents.authentication import AGENT_AUTH
from apps.agents.filtersets import BootstrapTokenFilterSet, EnrolmentFilterSet, NodeCommandFilterSet
from apps.agents.models import AgentToken, BootstrapToken, Enrolment, NodeCommand
from apps.agents.permissions import IsNodeAgent, agent_token_of
from apps.common.permissions import AdminOnly, IsViewer, ViewerReadOperatorWrite
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


# ---- bootstrap tokens and enrolments ---------------------------------------------------------------


@extend_schema(tags=["enrolment"])
class BootstrapTokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Bootstrap tokens (admins only): each lets agents without a node key ask to join, within its scope (a
    tier, racks or both), ``uses`` times, until ``expires_at`` or its revocation. The token is shown once, in
    the answer that issues it; it never fetches a node key."""

    queryset = (BootstrapToken.objects.select_related("tier").prefetch_related("racks")
                .order_by("-created_at", "-id"))
    serializer_class = BootstrapTokenSerializer
    permission_classes = [AdminOnly]
    conflicts = {"create": "`expires_at` is in the past or too far ahead (`errors` names it)"}
    filterset_class = BootstrapTokenFilterSet
    search_fields = ["key_prefix", "reason"]

    @extend_schema(request=BootstrapTokenIssueSerializer, responses={201: BootstrapTokenKeySerializer},
                   operation_id="bootstrap_token_issue")
    def create(self, request: Request) -> Response:
        ser = BootstrapTokenIssueSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        token, key = enrolments.bootstrap_token_issue(
            tier=data["scope"].get("tier"), racks=data["scope"].get("racks") or [], uses=data["uses"],
            expires_at=data["expires_at"], reason=data["reason"], auto_approve=data["auto_approve"],
            actor=request.user)
        body = dict(BootstrapTokenSerializer(token).data)
        return Response({**body, "token": key}, status=201)

    @extend_schema(request=RevokeSerializer, responses={200: BootstrapTokenSerializer},
                   operation_id="bootstrap_token_revoke")
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str) -> Response:
        ser = RevokeSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        token = enrolments.bootstrap_token_revoke(token=self.get_object(), actor=request.user,
                                                  reason=ser.validated_data["reason"])
        return Response(BootstrapTokenSerializer(token).data)


@extend_schema(tags=["enrolment"])
class EnrolmentViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Nodes asking to join. An agent joins with a bootstrap token (``POST``), its enrolment is staged
    ``pending`` with the admission rules' verdicts; an admin approves it (creating the node and its modules,
    or keeping the node a re-join was matched to) or rejects it; the agent polls with its own secret
    (``claim``) and receives its node key once approved. Viewers read."""

    queryset = (Enrolment.objects.select_related("tier", "rack", "node", "token")
                .order_by("-created_at", "-id"))
    serializer_class = EnrolmentSerializer
    filterset_class = EnrolmentFilterSet
    search_fields = ["hostname", "machine_id", "location_hint"]
    ordering_fields = ["created_at", "hostname", "state"]
    conflicts = {
        "create": "The machine has a pending enrolment already, or a module it reports is in another node "
                  "(`detail` names both nodes)",
        "approve": "Not pending, or it fails a hard admission rule (`detail` names it)",
        "approve_many": "One of them is not pending or fails a hard admission rule: none is approved",
        "reject": "Approved already",
        "reject_many": "One of them is approved already: none is rejected",
        "claim": "The node key was handed over and is in use, or the node is gone",
    }

    JOINING = ("create", "claim")
    # A join's modules name module types of the inventory (vendor and model): one it lacks is a 404.
    body_references = True

    def _joining(self) -> bool:
        """The join or the agent's poll: they prove themselves in their body (a bootstrap token, an enrolment
        secret, checked by the service), so they read no credentials (asked before ``self.action`` is set)."""
        action = getattr(self, "action", None)
        request = getattr(self, "request", None)
        if action is None and request is not None and request.method:
            action = getattr(self, "action_map", {}).get(request.method.lower())
        return action in self.JOINING

    def get_authenticators(self) -> list[Any]:
        return [] if self._joining() else super().get_authenticators()

    def get_permissions(self) -> list[BasePermission]:
        # reading is for viewers, deciding for admins
        return [AllowAny()] if self._joining() else [IsViewer()]

    @extend_schema(request=JoinSerializer, responses={
        201: JoinAnswerSerializer,
        403: OpenApiResponse(description="The bootstrap token is unknown, revoked, expired or used up"),
        413: OpenApiResponse(description=f"The join is over {enrolments.MAX_JOIN_BYTES} bytes")},
        operation_id="enrolment_join")
    def create(self, request: Request) -> Response:
        if len(request.body) > enrolments.MAX_JOIN_BYTES:
            return Response({"detail": f"a join is at most {enrolments.MAX_JOIN_BYTES} bytes; this one is "
                                       f"{len(request.body)}"}, status=413)
        ser = JoinSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        enrolment, secret = enrolments.enrolment_join(token_key=ser.validated_data["bootstrap_token"],
                                                      facts=ser.join_facts())
        return Response({"enrolment": EnrolmentSerializer(enrolment).data, "secret": secret}, status=201)

    @extend_schema(request=ApproveSerializer, responses={200: EnrolmentSerializer}, operation_id="enrolment_approve")
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str) -> Response:
        ser = ApproveSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        enrolment = enrolments.enrolment_approve(enrolment=self.get_object(), rack=d["rack"], slot=d["slot"],
                                                 tier=d["tier"], actor=request.user, reason=d["reason"])
        return Response(EnrolmentSerializer(enrolment).data)

    @extend_schema(request=BulkApproveSerializer, responses={200: EnrolmentSerializer(many=True)},
                   operation_id="enrolments_approve")
    @action(detail=False, methods=["post"], url_path="approve")
    def approve_many(self, request: Request) -> Response:
        ser = BulkApproveSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        placements = [enrolments.Placement(enrolment=i["enrolment"], rack=i["rack"], slot=i["slot"], tier=i["tier"])
                      for i in ser.validated_data["items"]]
        done = enrolments.enrolments_approve(placements=placements, actor=request.user,
                                             reason=ser.validated_data["reason"])
        return Response(EnrolmentSerializer(done, many=True).data)

    @extend_schema(request=RejectSerializer, responses={200: EnrolmentSerializer}, operation_id="enrolment_reject")
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str) -> Response:
        ser = RejectSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        enrolment = enrolments.enrolment_reject(enrolment=self.get_object(), actor=request.user,
                                                reason=ser.validated_data["reason"])
        return Response(EnrolmentSerializer(enrolment).data)

    @extend_schema(request=BulkRejectSerializer, responses={200: EnrolmentSerializer(many=True)},
                   operation_id="enrolments_reject")
    @action(detail=False, methods=["post"], url_path="reject")
    def reject_many(self, request: Request) -> Response:
        ser = BulkRejectSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        done = enrolments.enrolments_reject(enrolments=ser.validated_data["enrolments"], actor=request.user,
                                            reason=ser.validated_data["reason"])
        return Response(EnrolmentSerializer(done, many=True).data)

    @extend_schema(request=ClaimSerializer, responses={
        200: ClaimAnswerSerializer,
        403: OpenApiResponse(description="No enrolment with this id and secret")}, operation_id="enrolment_claim")
    @action(detail=True, methods=["post"])
    def claim(self, request: Request, pk: str) -> Response:
        ser = ClaimSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        try:
            enrolment_id = int(pk)
        except ValueError:
            raise Http404("no such enrolment") from None
        claim = enrolments.enrolment_claim(enrolment_id=enrolment_id, secret=ser.validated_data["secret"])
        e = claim.enrolment
        return Response({"enrolment": e.pk, "state": e.state, "node": e.node_id,
                         "hostname": e.node.hostname if e.node else e.hostname, "reason": e.decision_reason,
                         "key": claim.key or None})
