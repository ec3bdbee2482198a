"""Writes of node self-enrolment: bootstrap tokens (issue, revoke), a joining agent's enrolment (staged
with the admission rules' verdicts), its approval (the node and modules created, or a re-joining node
matched to its record) or rejection, and the hand-over of the node key to the agent that joined.

Keyword-only, typed, atomic; every operator action writes one audit record. A bootstrap token is
shared by many hosts, so it never fetches a key: each join gets an enrolment secret of its own, shown
only in the join's answer, and only that secret claims the node key once the enrolment is approved.
Tokens and secrets are stored as SHA-256 hashes and compared in constant time.
"""

from __future__ import annotations

import datetime as dt
import hmac
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction
from django.utils import timezone
from rest_framework.exceptions import PermissionDenied

from apps.agents.choices import AgentKind, EnrolmentState
from apps.agents.models import BootstrapToken, Enrolment
from apps.agents.services import agent_token_issue, agent_token_revoke, node_keys_revoke
from apps.audit.choices import Source
from apps.audit.services import audit_record
from apps.common.errors import CONFLICT, Conflict
from apps.common.keys import PREFIX_CHARS, hash_key, new_key
from apps.inventory import services as inventory
from apps.inventory.admission import Findings, evaluate
from apps.inventory.choices import MAX_MODULES_PER_NODE, NicKind, NodeState
from apps.inventory.models import AdmissionRule, Module, ModuleType, Node, Rack, Tier

# A bootstrap token lives at most this long, and admits at most this many joins.
MAX_TOKEN_LIFETIME = dt.timedelta(days=30)
MAX_TOKEN_USES = 10_000
# Bodies of a join above this many bytes are refused (413) before they are read.
MAX_JOIN_BYTES = 64 * 1024


def _actor_name(actor: Any) -> str:
    return str(getattr(actor, "username", None) or actor or "system")[:150]


# ---- bootstrap tokens -------------------------------------------------------------------------


@transaction.atomic
def bootstrap_token_issue(*, tier: Tier | None, racks: Sequence[Rack], uses: int, expires_at: dt.datetime,
                          reason: str, auto_approve: bool, actor: Any, source: str = Source.API
                          ) -> tuple[BootstrapToken, str]:
    """A new bootstrap token; its plaintext is returned once and never stored."""
    now = timezone.now()
    errors: dict[str, list[str | ValidationError]] = {}
    if tier is None and not racks:
        errors["scope"] = ["name a tier, racks or both: the nodes that join with this token go there"]
    if not 1 <= uses <= MAX_TOKEN_USES:
        errors["uses"] = [f"must be between 1 and {MAX_TOKEN_USES}"]
    if expires_at <= now:  # the clock's rule, not the schema's: a 409 (CONFLICT)
        errors["expires_at"] = [ValidationError(f"{expires_at.isoformat()} is in the past", code=CONFLICT)]
    elif expires_at > now + MAX_TOKEN_LIFETIME:
        errors["expires_at"] = [ValidationError(f"at most {MAX_TOKEN_LIFETIME.days} days ahead", code=CONFLICT)]
    if not reason.strip():
        errors["reason"] = ["say what the token is for (e.g. the delivery it enrols)"]
    if errors:
        raise ValidationError(errors)
    key, key_hash, key_prefix = new_key()
    token = BootstrapToken.objects.create(key_hash=key_hash, key_prefix=key_prefix, tier=tier, uses=uses,
                                          expires_at=expires_at, reason=reason.strip(), auto_approve=auto_approve,
                                          created_by=_actor_name(actor))
    token.racks.set(racks)
    audit_record(actor=actor, action="bootstrap_token.issue", target=token, source=source, reason=reason,
                 changes={"tier": [None, tier.kind if tier else None],
                          "racks": [None, sorted(r.name for r in racks)], "uses": [None, uses],
                          "expires_at": [None, expires_at.isoformat()], "auto_approve": [None, auto_approve]})
    return token, key


@transaction.atomic
def bootstrap_token_revoke(*, token: BootstrapToken, actor: Any, reason: str = "",
                           source: str = Source.API) -> BootstrapToken:
    """Refuse the token from now on (idempotent: a second revocation changes nothing)."""
    updated = BootstrapToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    token.refresh_from_db()
    if updated:
        audit_record(actor=actor, action="bootstrap_token.revoke", target=token, source=source, reason=reason)
    return token


def _token_for(key: str) -> BootstrapToken:
    """The bootstrap token whose plaintext is ``key``, locked; 403 naming why it is refused."""
    wanted = hash_key(key)
    candidates = BootstrapToken.objects.select_for_update().filter(key_prefix=key[:PREFIX_CHARS])
    token = next((t for t in candidates if hmac.compare_digest(t.key_hash, wanted)), None)
    if token is None:
        raise PermissionDenied("bootstrap_token: not a token this control plane issued")
    if token.revoked_at is not None:
        raise PermissionDenied(f"bootstrap_token: {token} was revoked at {token.revoked_at:%Y-%m-%d %H:%M} UTC")
    if token.expires_at <= timezone.now():
        raise PermissionDenied(f"bootstrap_token: {token} expired at {token.expires_at:%Y-%m-%d %H:%M} UTC")
    if token.used >= token.uses:
        raise PermissionDenied(f"bootstrap_token: {token} is used up ({token.used} of {token.uses} joins)")
    return token


# ---- what a join says, and the verdicts ----------------------------------------------------------


@dataclass
class ModuleFacts:
    serial: str
    module_type: ModuleType
    slot: int | None
    firmware_version: str = ""
    driver_version: str = ""
    framework_version: str = ""


@dataclass
class JoinFacts:
    """A join's content, parsed (``api/serializers.py``): the host and its modules."""

    hostname: str
    machine_id: str
    host: dict[str, Any]
    modules: list[ModuleFacts]
    location_hint: str = ""
    agent_version: str = ""
    raw_modules: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Candidate:
    """The node a join would become, as the admission rules read it."""

    hostname: str
    ecc_memory: bool
    pcie_lanes: int
    cpu_power_w: int
    power_budget_w: int
    cpu_clock_ghz: Decimal
    tier: Tier
    state: str = NodeState.ACTIVE  # judged as the serving node it is meant to become

    @property
    def tier_id(self) -> int:
        return int(self.tier.pk)


# Node fields a join may leave unknown, and what the node gets then (the model's default).
_DEFAULTED = ("l3_cache_mb", "memory_channels", "pcie_lanes", "cpu_power_w", "power_budget_w")


def _default(name: str) -> Any:
    model_field = Node._meta.get_field(name)
    assert isinstance(model_field, models.Field)
    return model_field.get_default()


def nic_kind_of(host: dict[str, Any]) -> str | None:
    """The NIC kind the host gave, or the one its speed implies (None when neither is known)."""
    if host.get("nic_kind"):
        return str(host["nic_kind"])
    speed = host.get("nic_speed_gbps")
    if speed is None:
        return None
    return next((kind for kind, at_least in ((NicKind.ETHERNET_100G, 100), (NicKind.ETHERNET_25G, 25),
                                             (NicKind.ETHERNET_10G, 10)) if speed >= at_least), None)


def node_fields(host: dict[str, Any]) -> dict[str, Any]:
    """The inventory node's fields from a join's host facts (the model's defaults where unknown)."""
    out = {name: host[name] if host.get(name) is not None else _default(name) for name in _DEFAULTED}
    nic = nic_kind_of(host)
    out.update(cpu_model=host.get("cpu_model") or "", cpu_cores=host["cpu_cores"],
               cpu_clock_ghz=Decimal(str(host["cpu_clock_ghz"])), memory_gb=host["memory_gb"],
               ecc_memory=bool(host.get("ecc_memory")), nic_kind=nic or _default("nic_kind"),
               nic_speed_gbps=host.get("nic_speed_gbps") or _default("nic_speed_gbps"))
    return out


def verdicts(*, facts: JoinFacts, tier: Tier | None, node: Node | None) -> dict[str, Any]:
    """The admission rules on the node a join would become: ``errors`` (hard: approval is refused) by
    field and ``warnings`` (soft). ``node``: the record a re-join was matched to. Unknown is never a
    pass: unknown ECC is a hard error, an unknown figure a soft rule reads is a warning."""
    host = facts.host
    fields = node_fields(host)
    if tier is not None:
        candidate = _Candidate(hostname=facts.hostname, ecc_memory=bool(host.get("ecc_memory")),
                               pcie_lanes=fields["pcie_lanes"], cpu_power_w=fields["cpu_power_w"],
                               power_budget_w=fields["power_budget_w"], cpu_clock_ghz=fields["cpu_clock_ghz"],
                               tier=tier)
        findings = evaluate(candidate, [(m.module_type, m.slot) for m in facts.modules],
                            settings=AdmissionRule.current())
    else:
        findings = Findings()
        findings.warnings.append({"rule": "tier", "field": "tier",
                                  "message": "the token's scope names no tier: the approval chooses one, and the "
                                             "tier's rules are judged then"})
    if host.get("ecc_memory") is None:
        findings.errors.pop("ecc_memory", None)
        findings.error("ecc_memory", f"node {facts.hostname}: the agent could not tell whether its memory is ECC; "
                                     "unknown is not a pass (give ecc_memory in the agent's --facts file)")
    if len(facts.modules) > MAX_MODULES_PER_NODE:
        findings.error("modules", f"node {facts.hostname} carries {len(facts.modules)} modules; the maximum is "
                                  f"{MAX_MODULES_PER_NODE}")
    slots = [m.slot for m in facts.modules if m.slot is not None]
    for slot in sorted({s for s in slots if slots.count(s) > 1}):
        findings.error("modules", f"two modules report slot {slot}")
    others = Node.objects.filter(hostname=facts.hostname)
    clash = (others.exclude(pk=node.pk) if node is not None else others).first()
    if clash is not None:
        findings.error("hostname", f"hostname {facts.hostname} is taken by node #{clash.pk} in rack {clash.rack}")
    for name in _DEFAULTED:
        if host.get(name) is None:
            findings.warnings.append({"rule": "unknown", "field": name,
                                      "message": f"{name} unknown to the agent: the node gets {_default(name)}; "
                                                 "correct it on the node or in the agent's --facts file"})
    if node is not None:
        known = set(node.modules.values_list("serial", flat=True))
        sent = {m.serial for m in facts.modules}
        if known != sent:
            findings.warnings.append({"rule": "rejoin", "field": "modules",
                                      "message": f"node {node.hostname} holds {sorted(known) or 'no modules'}; the "
                                                 f"agent reports {sorted(sent) or 'none'}: change the inventory by "
                                                 "hand if a module moved"})
    return {"errors": findings.errors, "warnings": findings.warnings}


def location_of(hint: str, token: BootstrapToken) -> tuple[Rack | None, int | None]:
    """The rack and slot a ``rack/slot`` location hint names, when the rack exists and is in the
    token's scope (an asset tag or an unknown rack prefills nothing)."""
    name, sep, slot = hint.rpartition("/")
    if not sep or not slot.isdigit():
        return None, None
    rack = Rack.objects.filter(name=name).first()
    if rack is None:
        return None, None
    allowed = list(token.racks.all())
    if allowed and rack not in allowed:
        return None, None
    return rack, int(slot)


def _matched_node(machine_id: str) -> Node | None:
    """The node a machine joined as before (its latest approved enrolment's), unless retired."""
    earlier = (Enrolment.objects.filter(machine_id=machine_id, state=EnrolmentState.APPROVED, node__isnull=False)
               .exclude(node__state=NodeState.RETIRED).select_related("node").order_by("-decided_at").first())
    return earlier.node if earlier is not None else None


def _check_serials(facts: JoinFacts, node: Node | None) -> None:
    """409 when a module the agent reports is in another node, naming both nodes."""
    others = (Module.objects.filter(serial__in=[m.serial for m in facts.modules], node__isnull=False)
              .exclude(node=node).select_related("node"))
    clashes = [f"module {m.serial} is in node {m.node} (#{m.node_id}), not in {facts.hostname}" for m in others]
    if clashes:
        raise Conflict("; ".join(clashes), extra={"modules": sorted(m.serial for m in others)})


# ---- joining ------------------------------------------------------------------------------------


@transaction.atomic
def enrolment_join(*, token_key: str, facts: JoinFacts) -> tuple[Enrolment, str]:
    """Stage a joining node: an enrolment, pending, with the admission rules' verdicts, and its own
    secret (returned once). A machine that joined before is matched to its node. The token's use is
    counted in the same transaction; a second join of a machine with one pending is a conflict."""
    token = _token_for(token_key)
    node = _matched_node(facts.machine_id)
    _check_serials(facts, node)
    pending = Enrolment.objects.filter(machine_id=facts.machine_id, state=EnrolmentState.PENDING).first()
    if pending is not None:
        raise Conflict(f"machine {facts.machine_id} has a pending enrolment already (#{pending.pk}, "
                       f"{pending.hostname}): an admin approves or rejects it first",
                       extra={"enrolment": pending.pk})
    rack, slot = (node.rack, node.slot) if node is not None else location_of(facts.location_hint, token)
    tier = node.tier if node is not None else token.tier
    secret, secret_hash, _prefix = new_key()
    try:
        with transaction.atomic():
            enrolment = Enrolment.objects.create(
                token=token, hostname=node.hostname if node else facts.hostname, machine_id=facts.machine_id,
                agent_version=facts.agent_version, facts=facts.host, modules=facts.raw_modules,
                location_hint=facts.location_hint, tier=tier, rack=rack, slot=slot, node=node,
                rejoin=node is not None, secret_hash=secret_hash,
                verdicts=verdicts(facts=facts, tier=tier, node=node))
    except IntegrityError:  # a twin join of the same machine committed first
        raise Conflict(f"machine {facts.machine_id} has a pending enrolment already: a second join raced the "
                       "first") from None
    BootstrapToken.objects.filter(pk=token.pk).update(used=token.used + 1)
    audit_record(actor=f"bootstrap:{token.key_prefix}", action="enrolment.join", target=enrolment,
                 source=Source.SYSTEM, related=token,
                 changes={"hostname": [None, enrolment.hostname], "machine_id": [None, facts.machine_id],
                          "modules": [None, sorted(m.serial for m in facts.modules)],
                          "rejoin_of": [None, node.pk if node else None]})
    if token.auto_approve and not enrolment.hard_errors and rack is not None and slot is not None:
        try:
            with transaction.atomic():
                enrolment_approve(enrolment=enrolment, rack=rack, slot=slot, tier=tier,
                                  actor=f"policy:{token}", reason=f"auto-approved by {token}",
                                  source=Source.SYSTEM)
        except (ValidationError, Conflict):  # e.g. the hinted slot is taken: left for an admin
            pass
        enrolment.refresh_from_db()
    return enrolment, secret


# ---- deciding -----------------------------------------------------------------------------------


def _lock(enrolment: Enrolment) -> Enrolment:
    return Enrolment.objects.select_for_update(of=("self",)).select_related("token", "node").get(pk=enrolment.pk)


def _module_types(raw: list[dict[str, Any]]) -> dict[tuple[str, str], ModuleType]:
    return {(t.vendor, t.model): t for t in ModuleType.objects.all()} if raw else {}


def _facts_of(enrolment: Enrolment) -> JoinFacts:
    """A staged enrolment's facts, as its join gave them."""
    types = _module_types(enrolment.modules)
    modules = [ModuleFacts(serial=m["serial"], module_type=types[(m["vendor"], m["model"])], slot=m.get("slot"))
               for m in enrolment.modules]
    return JoinFacts(hostname=enrolment.hostname, machine_id=enrolment.machine_id, host=enrolment.facts,
                     modules=modules, location_hint=enrolment.location_hint, raw_modules=enrolment.modules)


def _create_node(locked: Enrolment, *, rack: Rack, slot: int, tier: Tier, actor: Any, source: str) -> Node:
    reason = f"enrolment #{locked.pk}"
    node = inventory.inventory_create(
        instance=Node(hostname=locked.hostname, rack=rack, slot=slot, tier=tier, state=NodeState.STANDBY,
                      **node_fields(locked.facts)),
        actor=actor, source=source, reason=reason)
    types = _module_types(locked.modules)
    for i, m in enumerate(locked.modules):
        data = {"node": node, "slot": m.get("slot") if m.get("slot") is not None else i,
                "module_type": types[(m["vendor"], m["model"])],
                **{k: m.get(k) or "" for k in ("driver_version", "framework_version", "firmware_version")}}
        spare = Module.objects.filter(serial=m["serial"], node__isnull=True).first()
        if spare is not None:
            inventory.inventory_update(instance=spare, data=data, actor=actor, source=source, reason=reason)
        else:
            inventory.inventory_create(instance=Module(serial=m["serial"], **data), actor=actor, source=source,
                                       reason=reason)
    return node


@transaction.atomic
def enrolment_approve(*, enrolment: Enrolment, rack: Rack | None, slot: int | None, tier: Tier | None = None,
                      actor: Any, reason: str = "", source: str = Source.API) -> Enrolment:
    """Approve a pending enrolment: create its node (standby) and modules where ``rack``/``slot`` say, or,
    for a re-join, keep the matched node and revoke its old keys (the reinstalled agent lost them). The
    agent fetches its new node key with its secret. A hard verdict refuses (409, naming it); approving an
    approved enrolment again at the same place changes nothing."""
    locked = _lock(enrolment)
    if locked.state == EnrolmentState.APPROVED:
        if locked.rejoin or (rack in (None, locked.rack) and slot in (None, locked.slot)):
            return locked
        raise Conflict(f"{locked} was approved already, in {locked.rack} slot {locked.slot}")
    if locked.state != EnrolmentState.PENDING:
        raise Conflict(f"{locked} was {locked.state} by {locked.decided_by}: the agent joins again to be staged anew",
                       extra={"state": locked.state})
    rack, slot, tier = rack or locked.rack, slot if slot is not None else locked.slot, tier or locked.tier
    # The rules as they stand now, on the tier the node goes to (settings may have changed since the join).
    judged = verdicts(facts=_facts_of(locked), tier=tier, node=locked.node) if tier is not None else locked.verdicts
    if judged != locked.verdicts:
        Enrolment.objects.filter(pk=locked.pk).update(verdicts=judged)
    if judged.get("errors"):
        found = "; ".join(f"{f}: {m}" for f, ms in judged["errors"].items() for m in ms)
        raise Conflict(f"{locked} fails a hard admission rule: {found}", extra={"errors": judged["errors"]})
    missing = {k: ["needed to place the node (not prefilled from the agent's location hint)"]
               for k, v in (("rack", rack), ("slot", slot), ("tier", tier)) if v is None}
    if missing and not locked.rejoin:
        raise ValidationError(missing)
    scope = list(locked.token.racks.all())
    if scope and rack not in scope and not locked.rejoin:
        raise ValidationError({"rack": [f"{rack} is outside the bootstrap token's racks "
                                        f"({', '.join(r.name for r in scope)})"]})
    now, name = timezone.now(), _actor_name(actor)
    if locked.rejoin:
        node = locked.node
        if node is None or node.state == NodeState.RETIRED:
            raise Conflict(f"{locked}: the node it re-joins is gone or retired; reject it and let it join anew")
        node_keys_revoke(node=node, actor=actor, source=source)
    else:
        assert rack is not None and slot is not None and tier is not None
        node = _create_node(locked, rack=rack, slot=slot, tier=tier, actor=actor, source=source)
    Enrolment.objects.filter(pk=locked.pk).update(state=EnrolmentState.APPROVED, node=node, rack=node.rack,
                                                  slot=node.slot, tier=node.tier, decided_at=now, decided_by=name,
                                                  decision_reason=reason)
    locked.refresh_from_db()
    audit_record(actor=actor, action="enrolment.approve", target=locked, source=source, reason=reason, related=node,
                 changes={"state": [EnrolmentState.PENDING, EnrolmentState.APPROVED], "node": [None, node.pk],
                          "rack": [None, node.rack.name], "slot": [None, node.slot]})
    return locked


@dataclass
class Placement:
    enrolment: Enrolment
    rack: Rack | None = None
    slot: int | None = None
    tier: Tier | None = None


class BulkRefused(ValidationError):
    """A bulk approval refused whole; ``errors`` maps ``items[i]`` (and ``items[i].field``) to messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__(errors)
        self.errors = errors


def enrolments_approve(*, placements: Sequence[Placement], actor: Any, reason: str = "",
                       source: str = Source.API) -> list[Enrolment]:
    """Approve every enrolment of ``placements`` or none: each refusal is reported as ``items[i]``."""
    errors: dict[str, list[str]] = {}
    done: list[Enrolment] = []
    with transaction.atomic():
        for i, p in enumerate(placements):
            try:
                with transaction.atomic():
                    done.append(enrolment_approve(enrolment=p.enrolment, rack=p.rack, slot=p.slot, tier=p.tier,
                                                  actor=actor, reason=reason, source=source))
            except ValidationError as exc:
                for k, v in (exc.message_dict if hasattr(exc, "error_dict") else {"": exc.messages}).items():
                    where = f"items[{i}].{k}" if k and k != "non_field_errors" else f"items[{i}]"
                    errors.setdefault(where, []).extend(f"{p.enrolment.hostname}: {m}" for m in v)
            except Conflict as exc:
                errors.setdefault(f"items[{i}]", []).append(str(exc.detail))
        if errors:
            transaction.set_rollback(True)
    if errors:
        raise BulkRefused(errors)
    return done


@transaction.atomic
def enrolment_reject(*, enrolment: Enrolment, actor: Any, reason: str, source: str = Source.API) -> Enrolment:
    """Reject a pending enrolment (its agent is told at its next poll). Rejecting twice changes nothing."""
    if not reason.strip():
        raise ValidationError({"reason": ["say why the node is refused: its agent and the audit log show it"]})
    locked = _lock(enrolment)
    if locked.state == EnrolmentState.REJECTED:
        return locked
    if locked.state != EnrolmentState.PENDING:
        raise Conflict(f"{locked} was approved already: decommission the node instead", extra={"state": locked.state})
    Enrolment.objects.filter(pk=locked.pk, state=EnrolmentState.PENDING).update(
        state=EnrolmentState.REJECTED, decided_at=timezone.now(), decided_by=_actor_name(actor),
        decision_reason=reason.strip())
    locked.refresh_from_db()
    audit_record(actor=actor, action="enrolment.reject", target=locked, source=source, reason=reason,
                 changes={"state": [EnrolmentState.PENDING, EnrolmentState.REJECTED]})
    return locked


# ---- the agent's poll -----------------------------------------------------------------------------


@dataclass
class Claim:
    enrolment: Enrolment
    key: str = ""


@transaction.atomic
def enrolment_claim(*, enrolment_id: int, secret: str) -> Claim:
    """The joining agent's poll, proved by its enrolment secret: pending, rejected (with the reason), or
    approved with its node key, issued now. The key is handed over once; a poll after that, while the key
    has not been used (its answer was lost), revokes it and hands over a fresh one; once used, 409."""
    locked = Enrolment.objects.select_for_update(of=("self",)).filter(pk=enrolment_id).select_related("node").first()
    if locked is None or not hmac.compare_digest(locked.secret_hash, hash_key(secret)):
        raise PermissionDenied("no enrolment with this id and secret")
    if locked.state != EnrolmentState.APPROVED:
        return Claim(locked)
    node = locked.node
    if node is None or node.state == NodeState.RETIRED:
        raise Conflict(f"{locked}: its node is gone or retired; join again")
    previous = locked.agent_token
    if previous is not None:
        if previous.last_used_at is not None or previous.revoked_at is not None:
            raise Conflict(f"{locked}: its node key was handed over at {locked.key_delivered_at:%Y-%m-%d %H:%M:%S} "
                           "UTC and is in use (or revoked); an agent that lost it joins again")
        agent_token_revoke(token=previous, actor=f"enrolment:{locked.pk}", source=Source.SYSTEM)
    token, key = agent_token_issue(kind=AgentKind.NODE, node=node, actor=f"enrolment:{locked.pk}",
                                   note=f"enrolment #{locked.pk}", source=Source.SYSTEM)
    Enrolment.objects.filter(pk=locked.pk).update(agent_token=token, key_delivered_at=timezone.now())
    locked.refresh_from_db()
    return Claim(locked, key)


def enrolments_reject(*, enrolments: Sequence[Enrolment], actor: Any, reason: str,
                      source: str = Source.API) -> list[Enrolment]:
    """Reject every enrolment of ``enrolments`` or none (an approved one refuses the lot, 409)."""
    with transaction.atomic():
        return [enrolment_reject(enrolment=e, actor=actor, reason=reason, source=source) for e in enrolments]
