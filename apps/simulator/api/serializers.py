from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.common.serializers import SlugRefField
from apps.inventory.models import Node, VersionCombination
from apps.simulator.choices import FaultKind
from apps.simulator.models import Fault


class FaultSerializer(serializers.ModelSerializer[Fault]):
    node: serializers.SlugRelatedField[Node] = serializers.SlugRelatedField(slug_field="hostname", read_only=True,
                                                                                        allow_null=True)
    kind_label = serializers.CharField(source="get_kind_display", read_only=True)

    class Meta:
        model = Fault
        fields = ["id", "kind", "kind_label", "node", "combination", "enabled", "params", "started_at",
                  "created_at", "updated_at"]
        read_only_fields = fields


class FaultSetSerializer(serializers.Serializer[Any]):
    """Switch a fault on or off. Without ``node`` a node fault picks a fitting active node (or, when
    switching off, the node it is on); without ``combination`` bad_combination uses the newest
    candidate combination (or its params ``driver`` and ``framework``)."""

    kind = serializers.ChoiceField(choices=FaultKind.choices)
    node = SlugRefField(slug_field="hostname", queryset=Node.objects.all(), required=False,
                                        allow_null=True)
    combination = serializers.PrimaryKeyRelatedField(queryset=VersionCombination.objects.all(), required=False,
                                                     allow_null=True)
    enabled = serializers.BooleanField(default=True)
    params = serializers.DictField(required=False, allow_null=True, help_text="The fault's parameters (an object)")
    reason = serializers.CharField(required=False, allow_blank=True, default="")


class FaultPatchSerializer(serializers.Serializer[Any]):
    enabled = serializers.BooleanField(required=False)
    params = serializers.DictField(required=False, help_text="The fault's parameters (an object)")
    reason = serializers.CharField(required=False, allow_blank=True, default="")
