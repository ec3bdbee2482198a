"""API shapes of the agents app: the command channel, agent keys, an agent's own node, bootstrap tokens and
enrolments."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.agents.choices import ACK_STATES, AgentKind, EnrolmentState
from apps.agents.enrolments import MAX_TOKEN_LIFETIME, MAX_TOKEN_USES, JoinFacts, ModuleFacts
from apps.agents.models import AgentToken, BootstrapToken, Enrolment, NodeCommand
from apps.agents.services import MAX_ROTATION_OVERLAP_S
from apps.common.errors import MISSING
from apps.common.serializers import SlugRefField
from apps.inventory.choices import NicKind
from apps.inventory.models import ModuleType, Node, Rack, Tier

# ---- command channel --------------------------------------------------------------------------


class AgentCommandSerializer(serializers.ModelSerializer):
    class Meta:
        model = NodeCommand
        fields = ["id", "kind", "args", "created_at"]


class CommandAckSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=[(s.value, s.label) for s in ACK_STATES])
    result = serializers.JSONField(required=False, default=dict)


class NodeCommandSerializer(serializers.ModelSerializer):
    node_hostname = serializers.CharField(source="node.hostname", read_only=True)
    args = serializers.DictField(required=False, default=dict,
                                 help_text='The command\'s arguments, a JSON object (e.g. {"deadline_s": 300})')

    class Meta:
        model = NodeCommand
        fields = ["id", "node", "node_hostname", "kind", "args", "reason", "state", "created_at",
                  "created_by_name", "expires_at", "delivered_at", "progress_at", "finished_at", "result"]
        read_only_fields = ["state", "created_at", "created_by_name", "delivered_at", "progress_at", "finished_at",
                            "result"]
        extra_kwargs = {"reason": {"required": False}, "expires_at": {"required": False}}

    def validate_kind(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("must not be blank")
        return value.strip()



# ---- agent keys -----------------------------------------------------------------------------------


class AgentTokenSerializer(serializers.ModelSerializer):
    node_hostname = serializers.CharField(source="node.hostname", read_only=True, allow_null=True, default=None)
    is_active = serializers.BooleanField(read_only=True)

    class Meta:
        model = AgentToken
        fields = ["id", "kind", "node", "node_hostname", "key_prefix", "note", "created_at", "created_by",
                  "last_used_at", "revoked_at", "expires_at", "rotated_to", "is_active"]
        read_only_fields = fields


class AgentTokenIssueSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=AgentKind.choices)
    node = serializers.PrimaryKeyRelatedField(queryset=Node.objects.all(), required=False, allow_null=True,
                                              help_text="The node a node agent's key speaks for; none for the gateway")

    # ``validate`` in the schema: a node agent's key names its node, the gateway's names none. (``not``
    # the other kind: an ``enum`` here would be merged with the field's by drf-spectacular's enum hook.)
    schema_rules = {"anyOf": [
        {"properties": {"kind": {"not": {"enum": [AgentKind.GATEWAY.value]}}, "node": {"type": "integer"}},
         "required": ["node"]},
        {"properties": {"kind": {"not": {"enum": [AgentKind.NODE.value]}}, "node": {"not": {"type": "integer"}}}},
    ]}
    note = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["kind"] == AgentKind.NODE and attrs.get("node") is None:
            raise serializers.ValidationError({"node": ["a node agent's key needs its node"]})
        if attrs["kind"] == AgentKind.GATEWAY and attrs.get("node") is not None:
            raise serializers.ValidationError({"node": ["the gateway's key belongs to no node"]})
        return attrs


class AgentTokenRotateSerializer(serializers.Serializer):
    overlap_s = serializers.IntegerField(
        min_value=0, max_value=MAX_ROTATION_OVERLAP_S, default=3600,
        help_text="Seconds the old key keeps working beside the new one (default 1 h, at most 30 days)")
    note = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)


class AgentTokenKeySerializer(serializers.Serializer):
    token = AgentTokenSerializer()
    key = serializers.CharField(help_text="The new key, shown only in this answer (only its hash is stored)")
    replaces = AgentTokenSerializer(required=False, allow_null=True, help_text="The rotated key, with its expiry")


# ---- an agent's own node ---------------------------------------------------------------------


class AgentSelfModule(serializers.Serializer):
    serial = serializers.CharField()
    slot = serializers.IntegerField(allow_null=True)
    module_type = serializers.CharField()
    pcie_lanes = serializers.IntegerField(help_text="Lanes the module type needs: its expected link width")
    state = serializers.CharField()
    driver_version = serializers.CharField()
    framework_version = serializers.CharField()


class AgentSelfNode(serializers.Serializer):
    id = serializers.IntegerField()
    hostname = serializers.CharField()
    state = serializers.CharField()
    tier = serializers.CharField()


class AgentSelfSerializer(serializers.Serializer):
    node = AgentSelfNode()
    modules = AgentSelfModule(many=True)


# ---- bootstrap tokens and enrolments ---------------------------------------------------------------


class BootstrapScopeSerializer(serializers.Serializer):
    tier = SlugRefField(slug_field="kind", queryset=Tier.objects.all(), required=False,
                                        allow_null=True, help_text="The tier the joining nodes go to (its kind)")
    racks = SlugRefField(slug_field="name", queryset=Rack.objects.all(), many=True, required=False,
                                         help_text="The racks they may be placed in (names; none: any)")

    # As ``bootstrap_token_issue`` requires: a tier, racks or both.
    schema_rules = {"anyOf": [
        {"properties": {"tier": {"type": "string"}}, "required": ["tier"]},
        {"properties": {"racks": {"type": "array", "minItems": 1}}, "required": ["racks"]},
    ]}


class BootstrapTokenSerializer(serializers.ModelSerializer):
    scope = serializers.SerializerMethodField()
    is_active = serializers.BooleanField(read_only=True)

    class Meta:
        model = BootstrapToken
        fields = ["id", "key_prefix", "scope", "uses", "used", "expires_at", "reason", "auto_approve", "created_at",
                  "created_by", "revoked_at", "is_active"]
        read_only_fields = fields

    @extend_schema_field(BootstrapScopeSerializer)
    def get_scope(self, obj: BootstrapToken) -> dict[str, Any]:
        return {"tier": obj.tier.kind if obj.tier_id and obj.tier else None,
                "racks": sorted(r.name for r in obj.racks.all())}


class BootstrapTokenIssueSerializer(serializers.Serializer):
    scope = BootstrapScopeSerializer()
    uses = serializers.IntegerField(min_value=1, max_value=MAX_TOKEN_USES, default=1,
                                    help_text="How many joins the token admits (default 1)")
    expires_at = serializers.DateTimeField(help_text=f"When it stops admitting joins (at most "
                                                     f"{MAX_TOKEN_LIFETIME.days} days ahead)")
    reason = serializers.CharField(max_length=2000, help_text="What the token is for: the audit log shows it")
    auto_approve = serializers.BooleanField(
        default=False, help_text="Approve at once a join that passes every hard admission rule and whose location "
                                 "hint names a free rack slot in the scope")


class BootstrapTokenKeySerializer(BootstrapTokenSerializer):
    token = serializers.CharField(help_text="The token, shown only in this answer (only its hash is stored)")

    class Meta(BootstrapTokenSerializer.Meta):
        fields = [*BootstrapTokenSerializer.Meta.fields, "token"]
        read_only_fields = fields


class RevokeSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000, required=False, default="", allow_blank=True)


HOSTNAME = r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,126}[A-Za-z0-9])?$"
MACHINE_ID = r"^[A-Za-z0-9][A-Za-z0-9._:-]{7,63}$"
VERSION = r"^[A-Za-z0-9][A-Za-z0-9.+_~-]{0,63}$"


def _version_field(what: str) -> serializers.CharField:
    return serializers.CharField(max_length=64, required=False, default="", allow_blank=True, help_text=what)


class JoinHostSerializer(serializers.Serializer):
    """The host's facts: what the agent read (null: it could not; the node gets the inventory's default, or,
    for ECC, the join fails a hard rule until the value is given)."""

    cpu_model = serializers.CharField(max_length=128, required=False, default="", allow_blank=True)
    cpu_cores = serializers.IntegerField(min_value=1, max_value=4096, help_text="Physical cores")
    cpu_clock_ghz = serializers.DecimalField(max_digits=4, decimal_places=2, min_value=Decimal("0.10"),
                                             help_text="Highest sustained clock")
    l3_cache_mb = serializers.IntegerField(min_value=0, max_value=65536, required=False, allow_null=True, default=None)
    memory_gb = serializers.IntegerField(min_value=1, max_value=1 << 20)
    memory_channels = serializers.IntegerField(min_value=1, max_value=64, required=False, allow_null=True,
                                               default=None)
    ecc_memory = serializers.BooleanField(required=False, allow_null=True, default=None)
    nic_kind = serializers.ChoiceField(choices=NicKind.choices, required=False, allow_null=True, default=None)
    nic_speed_gbps = serializers.IntegerField(min_value=0, max_value=100_000, required=False, allow_null=True,
                                              default=None)
    pcie_lanes = serializers.IntegerField(min_value=0, max_value=1024, required=False, allow_null=True, default=None,
                                          help_text="PCIe lanes the board gives its module slots")
    pcie_slots = serializers.IntegerField(min_value=0, max_value=64, required=False, allow_null=True, default=None)
    cpu_power_w = serializers.IntegerField(min_value=0, max_value=100_000, required=False, allow_null=True,
                                           default=None)
    power_budget_w = serializers.IntegerField(min_value=1, max_value=100_000, required=False, allow_null=True,
                                              default=None)
    asset_tag = serializers.CharField(max_length=64, required=False, default="", allow_blank=True)


class JoinModuleSerializer(serializers.Serializer):
    serial = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$", max_length=64)
    vendor = serializers.CharField(max_length=64)
    model = serializers.CharField(max_length=64, help_text="With the vendor: a module type of the inventory")
    slot = serializers.IntegerField(min_value=0, max_value=3, required=False, allow_null=True, default=None)
    pcie_lanes = serializers.IntegerField(min_value=0, max_value=64, required=False, allow_null=True, default=None,
                                          help_text="The link width the module trained at")
    firmware_version = _version_field("Firmware version")
    driver_version = _version_field("Driver version")
    framework_version = _version_field("Framework version")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not ModuleType.objects.filter(vendor=attrs["vendor"], model=attrs["model"]).exists():
            known = ", ".join(f"{v} {m}" for v, m in ModuleType.objects.values_list("vendor", "model")[:20])
            raise serializers.ValidationError(
                {"model": [f"unknown module type {attrs['vendor']} {attrs['model']}: an admin adds it to the "
                           f"inventory first (known: {known or 'none'})"]}, code=MISSING)
        return attrs


class JoinSerializer(serializers.Serializer):
    bootstrap_token = serializers.CharField(max_length=128, write_only=True)
    hostname = serializers.RegexField(HOSTNAME, max_length=128)
    machine_id = serializers.RegexField(MACHINE_ID, max_length=64,
                                        help_text="The host's stable id (/etc/machine-id): a re-join is matched by it")
    agent_version = serializers.RegexField(VERSION, max_length=32, required=False, default="")
    location_hint = serializers.CharField(max_length=128, required=False, default="", allow_blank=True,
                                          help_text="rack/slot, or the host's asset tag")
    facts = JoinHostSerializer()
    modules = serializers.ListField(child=JoinModuleSerializer(), required=False, default=list, max_length=16)

    def validate_modules(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        serials = [m["serial"] for m in value]
        twice = sorted({s for s in serials if serials.count(s) > 1})
        if twice:
            raise serializers.ValidationError(f"serial {', '.join(twice)} reported twice")
        return value

    def join_facts(self) -> JoinFacts:
        data = self.validated_data
        host = {k: (float(v) if isinstance(v, Decimal) else v) for k, v in data["facts"].items()}
        types = {(t.vendor, t.model): t for t in ModuleType.objects.all()}
        modules = [ModuleFacts(serial=m["serial"], module_type=types[(m["vendor"], m["model"])], slot=m["slot"],
                               firmware_version=m["firmware_version"], driver_version=m["driver_version"],
                               framework_version=m["framework_version"]) for m in data["modules"]]
        return JoinFacts(hostname=data["hostname"], machine_id=data["machine_id"], host=host, modules=modules,
                         location_hint=data["location_hint"], agent_version=data["agent_version"],
                         raw_modules=[dict(m) for m in data["modules"]])


class EnrolmentSerializer(serializers.ModelSerializer):
    tier: serializers.SlugRelatedField[Tier] = serializers.SlugRelatedField(slug_field="kind", read_only=True,
                                                                             allow_null=True)
    rack: serializers.SlugRelatedField[Rack] = serializers.SlugRelatedField(slug_field="name", read_only=True,
                                                                             allow_null=True)
    node_hostname = serializers.CharField(source="node.hostname", read_only=True, allow_null=True, default=None)
    passes_hard_rules = serializers.SerializerMethodField()

    class Meta:
        model = Enrolment
        fields = ["id", "state", "hostname", "machine_id", "agent_version", "facts", "modules", "location_hint",
                  "tier", "rack", "slot", "verdicts", "passes_hard_rules", "node", "node_hostname", "rejoin", "token",
                  "created_at", "decided_at", "decided_by", "decision_reason", "key_delivered_at"]
        read_only_fields = fields

    def get_passes_hard_rules(self, obj: Enrolment) -> bool:
        return not obj.hard_errors


class JoinAnswerSerializer(serializers.Serializer):
    enrolment = EnrolmentSerializer()
    secret = serializers.CharField(help_text="This agent's own enrolment secret, shown only here: its polls "
                                             "(POST /api/v1/enrolments/{id}/claim/) send it")


class PlacementSerializer(serializers.Serializer):
    rack = SlugRefField(slug_field="name", queryset=Rack.objects.all(), required=False,
                                        allow_null=True, default=None, help_text="Rack name (default: the prefill)")
    slot = serializers.IntegerField(min_value=0, max_value=10_000, required=False, allow_null=True, default=None)
    tier = SlugRefField(slug_field="kind", queryset=Tier.objects.all(), required=False,
                                        allow_null=True, default=None, help_text="Tier kind (default: the token's)")


class ApproveSerializer(PlacementSerializer):
    reason = serializers.CharField(max_length=2000, required=False, default="", allow_blank=True)


class BulkApproveItemSerializer(PlacementSerializer):
    enrolment = serializers.PrimaryKeyRelatedField(queryset=Enrolment.objects.all())


class BulkApproveSerializer(serializers.Serializer):
    items = serializers.ListField(child=BulkApproveItemSerializer(), min_length=1, max_length=500)
    reason = serializers.CharField(max_length=2000, required=False, default="", allow_blank=True)


class RejectSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000, help_text="Why the node is refused")


class BulkRejectSerializer(RejectSerializer):
    enrolments = serializers.ListField(child=serializers.PrimaryKeyRelatedField(queryset=Enrolment.objects.all()),
                                       min_length=1, max_length=500)


class ClaimSerializer(serializers.Serializer):
    secret = serializers.CharField(max_length=128, help_text="The enrolment secret of the join's answer")


class ClaimAnswerSerializer(serializers.Serializer):
    enrolment = serializers.IntegerField()
    state = serializers.ChoiceField(choices=EnrolmentState.choices)
    node = serializers.IntegerField(allow_null=True)
    hostname = serializers.CharField(help_text="The node's hostname in the inventory: report under it")
    reason = serializers.CharField(allow_blank=True, help_text="Why it was rejected")
    key = serializers.CharField(allow_null=True, help_text="The node key, once approved (handed over once)")
