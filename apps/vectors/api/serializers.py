from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.inventory.models import Module, VersionCombination
from apps.vectors.models import Suite, Vector, VectorResult, VectorRun


class SuiteSerializer(serializers.ModelSerializer[Suite]):
    vector_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Suite
        fields = ["id", "name", "version", "description", "state", "provenance", "vector_count", "created_at",
                  "published_at"]
        read_only_fields = fields


class VectorSerializer(serializers.ModelSerializer[Vector]):
    class Meta:
        model = Vector
        fields = ["id", "sha256", "name", "operator", "opset", "model_sha256", "tolerances", "provenance",
                  "created_at"]
        read_only_fields = fields


class AgentVectorSerializer(serializers.Serializer[Any]):
    sha256 = serializers.CharField()
    name = serializers.CharField()
    operator = serializers.CharField()
    model = serializers.CharField(help_text="The ONNX model, base64")
    inputs = serializers.ListField(child=serializers.DictField(), help_text="name, dtype, shape, data (zlib, base64)")


class VectorRunSerializer(serializers.ModelSerializer[VectorRun]):
    suite_name = serializers.CharField(source="suite.__str__", read_only=True)

    class Meta:
        model = VectorRun
        fields = ["id", "suite", "suite_name", "combination", "purpose", "state", "phase", "reason", "message",
                  "timeout_s", "created_by_name", "created_at", "started_at", "finished_at", "summary"]
        read_only_fields = fields


class VectorRunCreateSerializer(serializers.Serializer[Any]):
    suite = serializers.PrimaryKeyRelatedField(queryset=Suite.objects.all())
    combination = serializers.PrimaryKeyRelatedField(
        queryset=VersionCombination.objects.select_related("driver", "framework"), required=False, allow_null=True,
        help_text="Without modules: run on the modules of its type that are on it now")
    modules = serializers.PrimaryKeyRelatedField(queryset=Module.objects.all(), many=True, required=False)
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    timeout_s = serializers.IntegerField(min_value=10, max_value=86400, required=False, default=600)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.get("modules") and not attrs.get("combination"):
            raise serializers.ValidationError({"modules": "name the modules, or a combination whose modules to use"})
        return attrs


class ValidateInputSerializer(serializers.Serializer[Any]):
    suite = serializers.PrimaryKeyRelatedField(queryset=Suite.objects.all())
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    timeout_s = serializers.IntegerField(min_value=10, max_value=86400, required=False, default=600)


class CancelInputSerializer(serializers.Serializer[Any]):
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class VectorResultSerializer(serializers.ModelSerializer[VectorResult]):
    case = serializers.CharField(source="vector.name", read_only=True)
    operator = serializers.CharField(source="vector.operator", read_only=True)
    sha256 = serializers.CharField(source="vector.sha256", read_only=True)
    serial = serializers.CharField(source="module.serial", read_only=True)

    class Meta:
        model = VectorResult
        fields = ["id", "run", "module", "serial", "vector", "case", "operator", "sha256", "outcome", "message",
                  "max_abs_error", "outputs", "baseline", "digest", "agent_ms", "created_at"]
        read_only_fields = fields


class UploadSerializer(serializers.Serializer[Any]):
    suite = serializers.CharField(max_length=100, help_text="Suite name: the vector joins its open draft version "
                                  "(a new version when the latest is published)")
    name = serializers.CharField(max_length=200, help_text="The case's name")
    operator = serializers.CharField(max_length=64, required=False, allow_blank=True, default="",
                                     help_text="The operator it exercises (default: the model's first node's)")
    model = serializers.FileField(help_text="The ONNX model (.onnx)")
    inputs = serializers.FileField(help_text="Input tensors: .npz keyed by input name, or one TensorProto .pb")
    expected = serializers.FileField(help_text="Expected outputs: .npz keyed by output name, or one TensorProto .pb")
    tolerances = serializers.CharField(help_text='JSON: output name to tolerance, e.g. {"y": {"gate": ["lsb"], '
                                       '"max_lsb": 1}}')


class UploadResultSerializer(serializers.Serializer[Any]):
    suite = SuiteSerializer()
    vector = VectorSerializer()
