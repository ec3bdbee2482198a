"""Entry points of the vectors API: parse, call one service or selector, render."""

from __future__ import annotations

import base64
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.generics import get_object_or_404
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.agents.authentication import AGENT_AUTH
from apps.agents.permissions import IsNodeAgent
from apps.common.errors import Conflict
from apps.common.permissions import ViewerReadOperatorWrite
from apps.inventory.models import VersionCombination
from apps.vectors import runs, selectors, services, validation
from apps.vectors.api import serializers as s
from apps.vectors.filtersets import VectorResultFilterSet, VectorRunFilterSet
from apps.vectors.models import Suite, Vector, VectorResult, VectorRun
from apps.vectors.upload import UploadInvalid, vector_from_upload


class SuiteViewSet(viewsets.ReadOnlyModelViewSet[Suite]):
    """Suites of regression test vectors (immutable once published). Operators upload vectors
    into a draft version and publish it."""

    serializer_class = s.SuiteSerializer
    permission_classes = [ViewerReadOperatorWrite]
    filterset_fields = ["name", "state"]
    conflicts = {"upload": "The suite's newest version is published (immutable)",
                 "publish": "A suite with no vectors"}
    search_fields = ["name", "description"]

    def get_queryset(self) -> QuerySet[Suite]:
        return selectors.suite_list()

    @extend_schema(request={"multipart/form-data": s.UploadSerializer}, responses={201: s.UploadResultSerializer},
                   summary="Upload one vector (model, inputs, expected outputs, tolerances) into a suite's draft")
    @action(detail=False, methods=["post"], parser_classes=[MultiPartParser], filter_backends=[])
    def upload(self, request: Request) -> Response:
        ser = s.UploadSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        try:
            spec = vector_from_upload(
                name=data["name"], operator=data["operator"], tolerances=data["tolerances"],
                model=data["model"].read(), model_filename=data["model"].name,
                inputs=data["inputs"].read(), inputs_filename=data["inputs"].name,
                expected=data["expected"].read(), expected_filename=data["expected"].name)
        except UploadInvalid as exc:
            raise ValidationError(exc.errors) from None
        with transaction.atomic():
            suite = services.suite_draft(name=data["suite"], actor=request.user)
            services.suite_add_vectors(suite=suite, specs=[spec], actor=request.user)
        vector = Vector.objects.get(sha256=spec.sha256)
        return Response({"suite": s.SuiteSerializer(selectors.suite_list().get(pk=suite.pk)).data,
                         "vector": s.VectorSerializer(vector).data}, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: s.SuiteSerializer},
                   summary="Publish a draft suite: from now on its vectors never change")
    @action(detail=True, methods=["post"], filter_backends=[])
    def publish(self, request: Request, pk: Any = None) -> Response:
        suite = services.suite_publish(suite=self.get_object(), actor=request.user)
        return Response(s.SuiteSerializer(selectors.suite_list().get(pk=suite.pk)).data)


class VectorViewSet(viewsets.ReadOnlyModelViewSet[Vector]):
    """Vectors: what they are and where they come from (model and tensors go to agents only)."""

    serializer_class = s.VectorSerializer
    filterset_fields = ["operator", "sha256", "suites"]
    search_fields = ["name", "operator"]

    def get_queryset(self) -> QuerySet[Vector]:
        return selectors.vector_list()


class VectorRunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                       viewsets.GenericViewSet[VectorRun]):
    """Runs of a suite over modules. Operators start and cancel; viewers read."""

    serializer_class = s.VectorRunSerializer
    permission_classes = [ViewerReadOperatorWrite]
    filterset_class = VectorRunFilterSet
    ordering_fields = ["created_at", "state"]
    conflicts = {"create": "A draft suite, or no module on a node to run it on",
                 "cancel": "The run has ended already"}

    def get_queryset(self) -> QuerySet[VectorRun]:
        return selectors.run_list()

    @extend_schema(request=s.VectorRunCreateSerializer, responses={201: s.VectorRunSerializer},
                   summary="Plan a run of a suite on modules (or on a combination's modules) and send it to agents")
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        ser = s.VectorRunCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        combination: VersionCombination | None = data.get("combination")
        modules = list(data.get("modules") or [])
        if not modules and combination is not None:
            modules = list(selectors.combination_modules(combination))
            if not modules:
                raise Conflict(f"no module is on {combination} now; name the modules")
        run = runs.run_create(suite=data["suite"], modules=modules, combination=combination, actor=request.user,
                              reason=data["reason"], timeout_s=data["timeout_s"])
        return Response(s.VectorRunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.CancelInputSerializer, responses={200: s.VectorRunSerializer},
                   summary="Cancel a run (a validation run still restores the gray nodes' versions)")
    @action(detail=True, methods=["post"], filter_backends=[])
    def cancel(self, request: Request, pk: Any = None) -> Response:
        run = self.get_object()
        ser = s.CancelInputSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        runs.run_cancel(run=run, actor=request.user, reason=ser.validated_data["reason"])
        return Response(s.VectorRunSerializer(selectors.run_list().get(pk=run.pk)).data)


class VectorResultViewSet(viewsets.ReadOnlyModelViewSet[VectorResult]):
    """One verdict per (run, module, case), judged by the control plane."""

    serializer_class = s.VectorResultSerializer
    filterset_class = VectorResultFilterSet
    ordering_fields = ["created_at", "outcome", "max_abs_error"]

    def get_queryset(self) -> QuerySet[VectorResult]:
        return selectors.result_list()


class CombinationValidateView(APIView):
    permission_classes = [ViewerReadOperatorWrite]
    conflicts = {"post": "The combination is neither candidate nor blocked (`state`), is being validated already "
                         "(`run`), or no gray node holds a module of its type"}

    @extend_schema(request=s.ValidateInputSerializer, responses={201: s.VectorRunSerializer},
                   operation_id="version_combination_validate", tags=["version-combinations"],
                   summary="Validate a candidate on the gray pool: install it, run the suite, restore the versions")
    def post(self, request: Request, pk: int) -> Response:
        combination = get_object_or_404(VersionCombination, pk=pk)
        ser = s.ValidateInputSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        run = validation.combination_validate(combination=combination, suite=ser.validated_data["suite"],
                                              actor=request.user, reason=ser.validated_data["reason"],
                                              timeout_s=ser.validated_data["timeout_s"])
        return Response(s.VectorRunSerializer(run).data, status=status.HTTP_201_CREATED)


class AgentVectorView(APIView):
    """A vector by its hash, for a node agent to run: the model and the inputs (never the expected outputs)."""

    authentication_classes = AGENT_AUTH
    permission_classes = [IsNodeAgent]

    @extend_schema(responses=s.AgentVectorSerializer, tags=["agent"])
    def get(self, request: Request, sha256: str) -> Response:
        vector = get_object_or_404(Vector.objects.only("sha256", "name", "operator", "model", "inputs"),
                                   sha256=sha256)
        return Response({"sha256": vector.sha256, "name": vector.name, "operator": vector.operator,
                         "model": base64.b64encode(bytes(vector.model)).decode("ascii"), "inputs": vector.inputs})
