"""REST endpoints of the inventory under /api/v1/.

Thin: the serializers check shapes and references, the services
(``apps.inventory.services``) validate with ``full_clean()``, write and audit,
the selectors build the list querysets.  Lists are read with ``values()``
(``apps.common.values``): a constant number of queries and no model
instance per row, whatever the page size.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from django.db.models import BooleanField, Count, ExpressionWrapper, F, Model, Q, QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import exceptions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from apps.audit.choices import Source
from apps.common.permissions import IsViewer
from apps.common.values import LIST_FILTER_BACKENDS, ValuesListMixin, ValuesPagination, values_rows
from apps.inventory import filtersets, selectors, services
from apps.inventory.api import serializers as s
from apps.inventory.models import (
    DriverRelease,
    ExternalEndpoint,
    FrameworkRelease,
    Module,
    ModuleType,
    Node,
    Rack,
    Tier,
)


@cache
def _prototype(build: Callable[[], QuerySet[Any]]) -> QuerySet[Any]:
    """The list queryset built once per process (its subquery annotations take longer to build
    than a page takes to read); never evaluated itself, views take ``.all()`` clones of it."""
    return build()


class InventoryViewSet(ValuesListMixin, viewsets.ModelViewSet):  # type: ignore[type-arg]
    """Reads for viewers, writes for admins; every write goes through the services."""

    permission_classes = [IsViewer]
    pagination_class = ValuesPagination
    filter_backends = LIST_FILTER_BACKENDS
    http_method_names = ["get", "post", "put", "patch", "delete", "head", "options"]

    def _fresh(self, pk: Any) -> Model:
        return self.get_queryset().get(pk=pk)  # type: ignore[no-any-return]

    def perform_create(self, serializer: serializers.BaseSerializer[Any]) -> None:
        model = self.get_queryset().model
        instance = model(**serializer.validated_data)
        services.inventory_create(instance=instance, actor=self.request.user, source=Source.API)
        serializer.instance = self._fresh(instance.pk)

    def perform_update(self, serializer: serializers.BaseSerializer[Any]) -> None:
        assert serializer.instance is not None
        instance = services.inventory_update(instance=serializer.instance, data=dict(serializer.validated_data),
                                             actor=self.request.user, source=Source.API)
        serializer.instance = self._fresh(instance.pk)

    def perform_destroy(self, instance: Model) -> None:
        services.inventory_delete(instance=instance, actor=self.request.user, source=Source.API)


def _bulk(view: InventoryViewSet, request: Request, bulk_class: type[serializers.Serializer[Any]],
          item_class: type[serializers.Serializer[Any]]) -> Response:
    bulk = bulk_class(data=request.data, context=view.get_serializer_context())
    if not bulk.is_valid():
        raise exceptions.ValidationError(bulk.errors)  # flattened to items[i].field by apps.common.errors
    model = view.get_queryset().model
    instances = [model(**item) for item in bulk.validated_data["items"]]
    created = services.bulk_create(instances=instances, actor=request.user, source=Source.API)
    pks = [obj.pk for obj in created]
    rows = {row["id"]: row for row in values_rows(item_class, view.get_queryset().filter(pk__in=pks))}
    return Response({"created": len(created), "items": [rows[pk] for pk in pks]}, status=status.HTTP_201_CREATED)


class RackViewSet(InventoryViewSet):
    """Racks; a rack holding nodes cannot be deleted (409)."""

    serializer_class = s.RackSerializer
    filterset_class = filtersets.RackFilterSet
    search_fields = ["name", "row"]
    ordering_fields = ["name", "row", "position", "power_budget_w", "node_count"]
    ordering = ["name"]

    def get_queryset(self) -> QuerySet[Rack]:
        return Rack.objects.annotate(node_count=Count("nodes"))


@extend_schema_view(create=extend_schema(exclude=True), destroy=extend_schema(exclude=True))
class TierViewSet(InventoryViewSet):
    """The three tiers are fixed; their names, descriptions and node bounds can change."""

    serializer_class = s.TierSerializer
    filterset_class = filtersets.TierFilterSet
    search_fields = ["name", "kind"]
    ordering_fields = ["level", "name"]
    ordering = ["level"]
    http_method_names = ["get", "put", "patch", "head", "options"]

    def get_queryset(self) -> QuerySet[Tier]:
        return Tier.objects.all()


class NodeViewSet(InventoryViewSet):
    """Nodes with their soft admission ``warnings`` and ``module_count``; hard rules reject with 400."""

    serializer_class = s.NodeSerializer
    filterset_class = filtersets.NodeFilterSet
    search_fields = ["hostname", "cpu_model", "rack__name"]
    ordering_fields = ["hostname", "slot", "state", "state_changed_at", "cpu_clock_ghz", "memory_gb",
                       "module_count", "created_at", "updated_at", "rack__name", "tier__level"]
    ordering = ["hostname"]

    def get_queryset(self) -> QuerySet[Node]:
        return _prototype(selectors.node_list).all()

    @extend_schema(request=s.NodeBulkSerializer, responses={201: s.NodeBulkResultSerializer},
                   summary="Create many nodes in one transaction: all or none")
    @action(detail=False, methods=["post"], url_path="bulk", filter_backends=[], pagination_class=None)
    def bulk(self, request: Request) -> Response:
        return _bulk(self, request, s.NodeBulkSerializer, s.NodeSerializer)


def module_queryset() -> QuerySet[Module]:
    """Modules with their type's pinned versions and whether they drift from them."""
    drift = Q(pinned_driver__isnull=False) & (~Q(driver_version=F("pinned_driver"))
                                               | ~Q(framework_version=F("pinned_framework")))
    return selectors.module_list().annotate(drift=ExpressionWrapper(drift, output_field=BooleanField()))


class ModuleViewSet(InventoryViewSet):
    """Modules in node slots (0-3, at most four per node), with their type's pinned versions and ``drift``."""

    serializer_class = s.ModuleSerializer
    filterset_class = filtersets.ModuleFilterSet
    search_fields = ["serial", "node__hostname", "driver_version", "framework_version"]
    ordering_fields = ["serial", "slot", "state", "driver_version", "framework_version", "created_at",
                       "updated_at", "node__hostname"]
    ordering = ["serial"]

    def get_queryset(self) -> QuerySet[Module]:
        return _prototype(module_queryset).all()

    @extend_schema(request=s.ModuleBulkSerializer, responses={201: s.ModuleBulkResultSerializer},
                   summary="Create many modules in one transaction: all or none")
    @action(detail=False, methods=["post"], url_path="bulk", filter_backends=[], pagination_class=None)
    def bulk(self, request: Request) -> Response:
        return _bulk(self, request, s.ModuleBulkSerializer, s.ModuleSerializer)

    @extend_schema(responses=s.ModuleSerializer(many=True),
                   summary="Modules whose driver or framework differs from their type's pinned combination")
    @action(detail=False, methods=["get"], url_path="drift")
    def drift(self, request: Request) -> Response:
        queryset = self.filter_queryset(self.get_queryset().filter(pk__in=selectors.version_drift().values("pk")))
        return self.values_page(queryset, s.ModuleSerializer)


class ModuleTypeViewSet(InventoryViewSet):
    """Accelerator module types: INT8 TOPS, power, PCIe lanes."""

    serializer_class = s.ModuleTypeSerializer
    filterset_class = filtersets.ModuleTypeFilterSet
    search_fields = ["vendor", "model"]
    ordering_fields = ["vendor", "model", "int8_tops", "power_w"]
    ordering = ["vendor", "model"]

    def get_queryset(self) -> QuerySet[ModuleType]:
        return ModuleType.objects.all()


class DriverReleaseViewSet(InventoryViewSet):
    """Driver releases, the parts of version combinations."""

    serializer_class = s.DriverReleaseSerializer
    filterset_class = filtersets.DriverReleaseFilterSet
    search_fields = ["vendor", "version", "notes"]
    ordering_fields = ["vendor", "version", "released_on"]
    ordering = ["vendor", "version"]

    def get_queryset(self) -> QuerySet[DriverRelease]:
        return DriverRelease.objects.all()


class FrameworkReleaseViewSet(InventoryViewSet):
    """Framework (runtime) releases, the parts of version combinations."""

    serializer_class = s.FrameworkReleaseSerializer
    filterset_class = filtersets.FrameworkReleaseFilterSet
    search_fields = ["name", "version", "notes"]
    ordering_fields = ["name", "version", "released_on"]
    ordering = ["name", "version"]

    def get_queryset(self) -> QuerySet[FrameworkRelease]:
        return FrameworkRelease.objects.all()


@extend_schema_view(
    update=extend_schema(request=s.VersionCombinationUpdateSerializer, responses=s.VersionCombinationSerializer),
    partial_update=extend_schema(request=s.VersionCombinationUpdateSerializer,
                                 responses=s.VersionCombinationSerializer),
)
class VersionCombinationViewSet(InventoryViewSet):
    """Driver + framework combinations per module type; states move only through ``set-state``."""

    serializer_class = s.VersionCombinationSerializer
    filterset_class = filtersets.VersionCombinationFilterSet
    search_fields = ["driver__version", "framework__name", "framework__version", "notes"]
    ordering_fields = ["created_at", "state", "state_changed_at"]
    ordering = ["module_type", "-created_at"]
    conflicts = {"set_state": "Validating and validated come only from a validation run on the gray pool; only a "
                              "validated combination is pinned (`state` says where it is)"}

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.combination_list()

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        if self.action in ("update", "partial_update"):
            return s.VersionCombinationUpdateSerializer
        return s.VersionCombinationSerializer

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        super().update(request, *args, **kwargs)
        return Response(s.VersionCombinationSerializer(self._fresh(kwargs["pk"])).data)

    @extend_schema(request=s.CombinationSetStateSerializer, responses=s.VersionCombinationSerializer,
                   summary="Move the combination to another state (validate, pin, block) with a reason")
    @action(detail=True, methods=["post"], url_path="set-state", filter_backends=[])
    def set_state(self, request: Request, pk: Any = None) -> Response:
        combination = self.get_object()
        body = s.CombinationSetStateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        services.combination_set_state(combination=combination, state=body.validated_data["state"],
                                       reason=body.validated_data["reason"], actor=request.user, source=Source.API)
        return Response(s.VersionCombinationSerializer(self._fresh(combination.pk)).data)


class ExternalEndpointViewSet(InventoryViewSet):
    """Tier-3 endpoints: a GPU cluster or a cloud model API, with quotas."""

    serializer_class = s.ExternalEndpointSerializer
    filterset_class = filtersets.ExternalEndpointFilterSet
    search_fields = ["name", "model", "url"]
    ordering_fields = ["name", "kind", "enabled"]
    ordering = ["name"]

    def get_queryset(self) -> QuerySet[ExternalEndpoint]:
        return ExternalEndpoint.objects.select_related("tier")
