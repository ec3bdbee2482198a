from __future__ import annotations

import datetime as dt
import zoneinfo
from typing import TYPE_CHECKING, Any

from django.utils import timezone
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied

if TYPE_CHECKING:
    from django.utils.functional import _StrPromise

from apps.common.datetimes import DateTimeField
from apps.common.errors import CONFLICT
from apps.common.roles import ADMIN, has_role
from apps.common.serializers import ErrorSerializer
from apps.inventory.models import Rack, Tier
from apps.operations import selectors, windows
from apps.operations.choices import AfterDrain, DeadlineAction, Owner, WindowActor
from apps.operations.models import (
    AutoscalerDecision,
    AutoscalerPolicy,
    ChangeWindow,
    Drain,
    Freeze,
    Quarantine,
    ScaleRequest,
)


class DrainSerializer(serializers.ModelSerializer[Drain]):
    hostname = serializers.CharField(source="node.hostname", read_only=True)
    node_state = serializers.CharField(source="node.state", read_only=True)
    waiting_for = serializers.SerializerMethodField(help_text='e.g. "waiting for 3 in-flight requests; '
                                                              'deadline in 4m12s"')

    class Meta:
        model = Drain
        fields = ["id", "node", "hostname", "node_state", "kind", "owner", "state", "reason", "waiting_for",
                  "created_by_name", "created_at", "started_at", "deadline", "deadline_action", "resume_after",
                  "after", "drained_at", "forced", "in_flight_at_force", "alerted_at", "released_at",
                  "released_by_name", "release_reason", "overridden", "scale_request"]
        read_only_fields = fields

    def get_waiting_for(self, obj: Drain) -> str:
        return selectors.drain_waiting_for(obj)


class QuarantineSerializer(serializers.ModelSerializer[Quarantine]):
    serial = serializers.CharField(source="module.serial", read_only=True)
    module_state = serializers.CharField(source="module.state", read_only=True)

    class Meta:
        model = Quarantine
        fields = ["id", "module", "serial", "module_state", "owner", "reason", "previous_state", "created_by_name",
                  "created_at", "released_at", "released_by_name", "release_reason", "overridden"]
        read_only_fields = fields


class ScaleRequestSerializer(serializers.ModelSerializer[ScaleRequest]):
    tier_kind = serializers.CharField(source="tier.kind", read_only=True)
    tier_name = serializers.CharField(source="tier.name", read_only=True)
    released = serializers.SerializerMethodField()
    draining = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()

    class Meta:
        model = ScaleRequest
        fields = ["id", "tier", "tier_kind", "tier_name", "from_active", "desired", "owner", "state", "reason",
                  "created_by_name", "created_at", "finished_at", "activated", "reclaimed", "released", "draining",
                  "progress", "note"]
        read_only_fields = fields

    def get_released(self, obj: ScaleRequest) -> list[str]:
        return selectors.scale_released(sr=obj)

    def get_draining(self, obj: ScaleRequest) -> list[str]:
        return [d.node.hostname for d in obj.drains.all() if d.is_active]

    def get_progress(self, obj: ScaleRequest) -> str:
        return selectors.scale_progress(sr=obj)


class AutoscalerPolicySerializer(serializers.ModelSerializer[AutoscalerPolicy]):
    tier_kind = serializers.CharField(source="tier.kind", read_only=True)
    reason = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=1000,
                                   help_text="Why the policy changes; kept in the audit record")

    class Meta:
        model = AutoscalerPolicy
        fields = ["id", "tier", "tier_kind", "enabled", "dry_run", "target_queue_per_node", "tolerance",
                  "scale_up_window_s", "scale_down_window_s", "max_step", "scale_up_percent", "scale_down_percent",
                  "scale_down_headroom", "cooldown_s", "min_nodes", "max_nodes",
                  "drain_deadline_s", "last_scaled_at", "created_at", "updated_at", "reason"]
        read_only_fields = ["last_scaled_at", "created_at", "updated_at"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        fields = {k: v for k, v in attrs.items() if k != "reason"}
        instance = AutoscalerPolicy(**{**(self._current() or {}), **fields})
        instance.full_clean(validate_unique=False, validate_constraints=False)
        return attrs

    def _current(self) -> dict[str, Any] | None:
        if self.instance is None:
            return None
        return {f.name: getattr(self.instance, f.name) for f in AutoscalerPolicy._meta.concrete_fields
                if f.name not in {"id", "created_at", "updated_at", "last_scaled_at"}}


class AutoscalerDecisionSerializer(serializers.ModelSerializer[AutoscalerDecision]):
    tier_kind = serializers.CharField(source="tier.kind", read_only=True)

    class Meta:
        model = AutoscalerDecision
        fields = ["id", "tier", "tier_kind", "time", "current", "queue_depth", "target_queue_per_node",
                  "raw_desired", "recommendation", "desired", "action", "dry_run", "explanation", "inputs",
                  "scale_request", "evaluations", "until", "window"]
        read_only_fields = fields


# ---- action inputs ----------------------------------------------------------------------------


class OwnedInputSerializer(serializers.Serializer[Any]):
    """Who acts (the hold's owner) and whether an operator overrides. Over the API a user acts as the
    ``operator`` owner; only admins may name another owner (e.g. to release a hold left by a stopped
    rollout as that rollout)."""

    owner = serializers.ChoiceField(choices=Owner.choices, default=Owner.OPERATOR,
                                    help_text="Who holds (or clears) the hold; one owner never clears another's. "
                                              "Owners other than operator: admins only (403 for others)")
    override = serializers.BooleanField(default=False, help_text="Operator only, with a reason (audited): clear "
                                        "another owner's hold, or go below the tier's capacity floor")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        request = self.context.get("request")
        if attrs.get("owner", Owner.OPERATOR) != Owner.OPERATOR and request is not None \
                and not has_role(request.user, ADMIN):
            # The request is well formed (the schema lists every owner): the caller's role may not ask it.
            raise PermissionDenied(f"owner: only admins may act as the {attrs['owner']} owner")
        if attrs.get("override"):
            if attrs.get("owner") != Owner.OPERATOR:
                raise serializers.ValidationError({"override": ["only the operator owner may override"]})
            if not str(attrs.get("reason", "")).strip():
                raise serializers.ValidationError({"reason": ["an override needs a reason"]})
        return attrs


class OwnedReasonSerializer(OwnedInputSerializer):
    reason = serializers.CharField(max_length=2000, allow_blank=False)


class QuarantineInputSerializer(OwnedReasonSerializer):
    pass


RESUME_AFTER_MAX_DAYS = 90


class CordonInputSerializer(OwnedReasonSerializer):
    resume_after = DateTimeField(required=False, allow_null=True, default=None,
                                             help_text="Uncordon automatically at this time: in the future, "
                                                       f"at most {RESUME_AFTER_MAX_DAYS} days ahead")

    def validate_resume_after(self, value: dt.datetime | None) -> dt.datetime | None:
        if value is None:
            return None
        now = timezone.now()
        if value <= now:
            raise serializers.ValidationError(f"must be in the future (it is {value.isoformat()}; "
                                              f"now is {now.isoformat(timespec='seconds')})", code=CONFLICT)
        if value > now + dt.timedelta(days=RESUME_AFTER_MAX_DAYS):
            raise serializers.ValidationError(f"must be at most {RESUME_AFTER_MAX_DAYS} days ahead", code=CONFLICT)
        return value


DEADLINE_S_MAX = 7 * 24 * 3600


def _deadline_errors(lo: int) -> dict[str, str | _StrPromise]:
    """Out of range or not a whole number: one message naming the allowed range (DRF's default
    names only the bound crossed)."""
    text = f"must be a whole number of seconds, {lo}-{DEADLINE_S_MAX} (7 days)"
    return {"min_value": text, "max_value": text, "invalid": text, "max_string_length": text}


class DrainInputSerializer(CordonInputSerializer):
    deadline_s = serializers.IntegerField(min_value=0, max_value=DEADLINE_S_MAX, required=False, allow_null=True,
                                          default=900, error_messages=_deadline_errors(0),
                                          help_text="Seconds until the deadline action; null or 0 for no deadline")
    deadline_action = serializers.ChoiceField(choices=DeadlineAction.choices, default=DeadlineAction.ALERT)
    then = serializers.ChoiceField(choices=[(AfterDrain.STAY, "Stay drained"),
                                            (AfterDrain.MAINTENANCE, "Enter maintenance")],
                                   default=AfterDrain.STAY)


class MaintenanceInputSerializer(OwnedReasonSerializer):
    deadline_s = serializers.IntegerField(min_value=0, max_value=DEADLINE_S_MAX, required=False, allow_null=True,
                                          default=900, error_messages=_deadline_errors(0),
                                          help_text="Seconds until the deadline action; null or 0 for no deadline")
    deadline_action = serializers.ChoiceField(choices=DeadlineAction.choices, default=DeadlineAction.ALERT)


class ReleaseInputSerializer(OwnedInputSerializer):
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class GrayInputSerializer(serializers.Serializer[Any]):
    gray = serializers.BooleanField(help_text="true: join the gray pool; false: leave it")
    reason = serializers.CharField(max_length=2000)


class DecommissionInputSerializer(serializers.Serializer[Any]):
    reason = serializers.CharField(max_length=2000, help_text="Why the node leaves the fleet for good")


class GrayResultSerializer(serializers.Serializer[Any]):
    changed = serializers.BooleanField()
    node = serializers.DictField(help_text="id, hostname, state, gray")


class ScaleInputSerializer(serializers.Serializer[Any]):
    desired = serializers.IntegerField(min_value=0, max_value=100_000, help_text="Desired active node count")
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    supersede = serializers.BooleanField(default=False, help_text="Replace a running scale request of the tier")
    drain_deadline_s = serializers.IntegerField(min_value=1, max_value=DEADLINE_S_MAX, default=900,
                                                error_messages=_deadline_errors(1),
                                                help_text="Deadline of scale-down drains (they alert, never force)")
    override = serializers.BooleanField(default=False, help_text="Scale down below the tier's capacity floor "
                                        "(needs a reason; audited)")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["override"] and not attrs["reason"].strip():
            raise serializers.ValidationError({"reason": ["an override needs a reason"]})
        return attrs


class CapacityNumbersSerializer(serializers.Serializer[Any]):
    tier = serializers.CharField()
    unit = serializers.ChoiceField(choices=["node", "module"])
    have = serializers.IntegerField(help_text="Serving nodes (or modules) now")
    after = serializers.IntegerField(help_text="What the action would leave")
    floor = serializers.IntegerField(help_text="max(min_active_nodes, need), or the modules the traffic needs")
    need = serializers.IntegerField(help_text="Active nodes the tier's traffic needs")
    need_modules = serializers.IntegerField()
    binding = serializers.CharField(help_text="Which figure sets the need: traffic, utilisation, queue or none")
    min_active_nodes = serializers.IntegerField()


class ConflictSerializer(ErrorSerializer):
    """The error shape with the numbers of a refusal."""

    detail = serializers.CharField(help_text="What conflicts, in words, with the numbers")
    capacity = CapacityNumbersSerializer(required=False, help_text="Present when the capacity guard refused")
    holder = serializers.DictField(required=False, help_text="Present when another owner holds the node or module: "
                                   "owner, by, reason")


class NodeBriefSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    hostname = serializers.CharField()
    state = serializers.CharField()


class ModuleBriefSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    serial = serializers.CharField()
    state = serializers.CharField()


class NodeActionResultSerializer(serializers.Serializer[Any]):
    changed = serializers.BooleanField(help_text="False when the node was already so (same owner)")
    node = NodeBriefSerializer()
    drain = DrainSerializer(allow_null=True)


BULK_ACTIONS = ("cordon", "drain", "uncordon", "maintenance", "maintenance_leave")
MAX_BULK_NODES = 1000


class BulkNodeActionInputSerializer(serializers.Serializer[Any]):
    """The action and its nodes; the action's own fields (reason, owner, deadline_s, ...) beside them, as
    the single action takes them."""

    action = serializers.ChoiceField(choices=BULK_ACTIONS)
    nodes = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=1,
                                  max_length=MAX_BULK_NODES, help_text="Node ids")


class BulkNodeActionResultSerializer(serializers.Serializer[Any]):
    action = serializers.ChoiceField(choices=BULK_ACTIONS)
    results = NodeActionResultSerializer(many=True)


class ModuleActionResultSerializer(serializers.Serializer[Any]):
    changed = serializers.BooleanField()
    module = ModuleBriefSerializer()
    quarantine = QuarantineSerializer(allow_null=True)


class ScaleResultSerializer(serializers.Serializer[Any]):
    changed = serializers.BooleanField()
    scale_request = ScaleRequestSerializer()


class SchedulableModuleSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    serial = serializers.CharField()
    slot = serializers.IntegerField(allow_null=True)


class SchedulableNodeSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    hostname = serializers.CharField()
    rack = serializers.CharField()
    modules = SchedulableModuleSerializer(many=True)


class SchedulableSerializer(serializers.Serializer[Any]):
    generated_at = serializers.DateTimeField()
    tiers = serializers.DictField(child=SchedulableNodeSerializer(many=True),
                                  help_text="Per tier kind: the nodes that take new work, with their modules "
                                            "that take work")


# ---- change windows and freezes ---------------------------------------------------------------


class _ScopedRuleSerializer(serializers.ModelSerializer[Any]):
    """Shared by windows and freezes: tiers and racks by id (none of either: the fleet), the scope in
    words, and the model's own ``clean()`` on what the request would store."""

    tiers = serializers.PrimaryKeyRelatedField(many=True, required=False, queryset=Tier.objects.all(),
                                               help_text="Tier ids; with no racks either, the whole fleet")
    racks = serializers.PrimaryKeyRelatedField(many=True, required=False, queryset=Rack.objects.all(),
                                               help_text="Rack ids; with no tiers either, the whole fleet")
    scope = serializers.SerializerMethodField()

    def get_scope(self, obj: Any) -> str:
        return windows.scope_text(obj)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        model: type[ChangeWindow | Freeze] = self.Meta.model
        names = {f.name for f in model._meta.concrete_fields} - {"id", "created_at", "updated_at"}
        plain = {k: v for k, v in attrs.items() if k in names}
        current = {n: getattr(self.instance, n) for n in names} if self.instance is not None else {}
        model(**{**current, **plain}).full_clean(validate_unique=False, validate_constraints=False)
        return attrs


TIME_ZONES = sorted(zoneinfo.available_timezones())


class ChangeWindowSerializer(_ScopedRuleSerializer):
    actors = serializers.ListField(
        child=serializers.ChoiceField(choices=WindowActor.choices, error_messages={
            "invalid_choice": f"unknown {{input}}; one of: {', '.join(WindowActor.values)}"}),
        allow_empty=False, error_messages={"empty": f"name at least one of: {', '.join(WindowActor.values)}"},
        help_text="What it governs: " + ", ".join(WindowActor.values) + " (one named twice counts once)")
    time_zone = serializers.ChoiceField(
        choices=TIME_ZONES, default="UTC", help_text="The IANA zone the cron expression reads in",
        error_messages={"invalid_choice": "{input!r} is not a known time zone (an IANA name such as "
                                          "'Europe/Berlin' or 'UTC')"})
    next_opening = serializers.SerializerMethodField(help_text="The next opening from now (UTC), or null")
    open_now = serializers.SerializerMethodField(help_text="When open now: until when (UTC); else null")
    reason = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=1000,
                                   help_text="Why the window changes; kept in the audit record")

    class Meta:
        model = ChangeWindow
        fields = ["id", "name", "cron", "duration_minutes", "time_zone", "tiers", "racks", "scope", "actors",
                  "next_opening", "open_now", "created_by_name", "created_at", "updated_at", "reason"]
        read_only_fields = ["created_by_name", "created_at", "updated_at"]

    def validate_actors(self, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))  # the schema allows a repeat: it names the actor once

    def get_next_opening(self, obj: ChangeWindow) -> dt.datetime | None:
        return windows.next_opening(obj, timezone.now())

    def get_open_now(self, obj: ChangeWindow) -> dt.datetime | None:
        span = windows.open_at(obj, timezone.now())
        return span[1] if span else None


class FreezeSerializer(_ScopedRuleSerializer):
    active = serializers.SerializerMethodField(help_text="Whether it holds now")

    class Meta:
        model = Freeze
        fields = ["id", "reason", "starts_at", "ends_at", "tiers", "racks", "scope", "active", "created_by_name",
                  "created_at"]
        read_only_fields = ["created_by_name", "created_at"]

    def get_active(self, obj: Freeze) -> bool:
        return obj.starts_at <= timezone.now() < obj.ends_at
