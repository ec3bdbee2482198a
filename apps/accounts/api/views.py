from __future__ import annotations

from typing import Any, cast

from django.contrib.auth.models import User
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts import services
from apps.accounts.api.serializers import (
    MeSerializer,
    ServiceAccountCreateSerializer,
    ServiceAccountSerializer,
    ServiceTokenIssuedSerializer,
    ServiceTokenIssueSerializer,
    ServiceTokenSerializer,
)
from apps.accounts.choices import ScopeKind
from apps.accounts.models import ServiceAccount, ServiceToken
from apps.accounts.selectors import user_profile
from apps.common.permissions import AdminOnly, IsViewer


class MeView(APIView):
    """Who the caller is, which role they hold and where they may act (their scope)."""

    permission_classes = [IsViewer]

    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        return Response(MeSerializer(user_profile(user=request.user)).data)


@extend_schema(tags=["service accounts"])
class ServiceAccountViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Accounts automation acts as (admins only): no password, no login; a role and a scope like a
    person's; tokens with an expiry, shown once, stored hashed, revocable."""

    queryset = (ServiceAccount.objects.select_related("owner", "user__access_scope")
                .prefetch_related("user__groups").order_by("name"))
    serializer_class = ServiceAccountSerializer
    permission_classes = [AdminOnly]
    search_fields = ["name"]
    conflicts = {"create": "A user or service account of that name exists already",
                 "tokens": "(POST) `expires_at` is not in the future (`errors` names it)"}

    @extend_schema(request=ServiceAccountCreateSerializer, responses={201: ServiceAccountSerializer},
                   operation_id="service_account_create")
    def create(self, request: Request) -> Response:
        ser = ServiceAccountCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        scope = data.get("scope") or {"kind": ScopeKind.FLEET, "values": []}
        account = services.service_account_create(name=data["name"], role=data["role"], owner=cast(User, request.user),
                                                  scope_kind=scope["kind"], scope_values=scope["values"],
                                                  actor=request.user)
        return Response(ServiceAccountSerializer(self.get_queryset().get(pk=account.pk)).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(methods=["GET"], responses={200: ServiceTokenSerializer(many=True)},
                   operation_id="service_account_tokens")
    @extend_schema(methods=["POST"], request=ServiceTokenIssueSerializer,
                   responses={201: ServiceTokenIssuedSerializer}, operation_id="service_token_issue")
    @action(detail=True, methods=["get", "post"], pagination_class=None, filter_backends=[])
    def tokens(self, request: Request, pk: str) -> Response:
        account = self.get_object()
        if request.method == "GET":
            return Response(ServiceTokenSerializer(account.tokens.all(), many=True).data)
        ser = ServiceTokenIssueSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        token, key = services.service_token_issue(account=account, actor=request.user, **ser.validated_data)
        data: dict[str, Any] = {**ServiceTokenSerializer(token).data, "token": key}
        return Response(data, status=status.HTTP_201_CREATED)


class ServiceTokenRevokeView(APIView):
    """Refuse a service account's token from now on (401 at its next use)."""

    permission_classes = [AdminOnly]

    @extend_schema(tags=["service accounts"], request=None, responses={200: ServiceTokenSerializer},
                   operation_id="service_token_revoke")
    def post(self, request: Request, pk: int, token_id: int) -> Response:
        token = get_object_or_404(ServiceToken, pk=token_id, account_id=pk)
        return Response(ServiceTokenSerializer(services.service_token_revoke(token=token, actor=request.user)).data)
