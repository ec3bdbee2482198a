"""Reads of health: the sweep's inputs (a few set-based reads through the telemetry,
inventory and operations selectors), findings for pages and the API, the check
settings with their defaults filled in."""

from __future__ import annotations

import datetime as dt
import json
import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone
from rest_framework.exceptions import PermissionDenied

import apps.telemetry.selectors.sweep as telemetry
from apps.audit.models import AuditEvent
from apps.common.roles import ADMIN, OPERATOR, has_role
from apps.health.advisor import FINDING_ACTIONS, remedy_actions
from apps.health.checks import BREAKER, CHECKS
from apps.health.choices import ACTIVE_FINDING_STATES, SEVERITY_ORDER, FindingState, Severity
from apps.health.evidence import cause_of
from apps.health.inputs import Context, EndpointView, ModuleView, NodeView, TierView
from apps.health.models import Finding, HealthCheck, Silence
from apps.inventory import scopes
from apps.inventory.choices import (
    SERVING_STATES,
    CombinationState,
    ModuleState,
    NodeState,
    module_allowed_actions,
    node_allowed_actions,
)
from apps.inventory.models import ExternalEndpoint, Module, Node, Tier, VersionCombination
from apps.operations import budget
from apps.operations.selectors import overdue_drains


@dataclass(frozen=True)
class CheckConfig:
    name: str
    params: dict[str, Any]  # defaults with the operator's changes
    policy: str
    enabled: bool
    raise_n: int
    raise_m: int
    clear_k: int


def check_configs() -> dict[str, CheckConfig]:
    """Every check's settings (its row, or the defaults where it has none yet)."""
    rows = {c.name: c for c in HealthCheck.objects.all()}
    out = {}
    for name, spec in CHECKS.items():
        row = rows.get(name)
        params = {**spec.defaults, **(row.params if row else {})}
        out[name] = CheckConfig(name, params, row.policy if row else spec.policy, row.enabled if row else True,
                                row.raise_n if row else 3, row.raise_m if row else 5, row.clear_k if row else 5)
    return out


def _age(now: dt.datetime, seen: dt.datetime | None) -> float | None:
    return None if seen is None else max(0.0, (now - seen).total_seconds())


def sweep_inputs(*, now: dt.datetime, window_min: int, stale_s: float
                 ) -> tuple[list[NodeView], list[ModuleView], list[TierView], Context]:
    """Everything the checks judge, for the whole fleet, in a handful of queries."""
    since = now.replace(second=0, microsecond=0) - dt.timedelta(minutes=window_min - 1)
    node_status = telemetry.node_status_rows()
    overdue = overdue_drains()
    module_status = telemetry.module_status_rows()
    cpu_minutes = telemetry.node_cpu_minutes(since=since)
    baselines = telemetry.module_counter_baselines(since=since)
    queues = telemetry.tier_queue_minutes(since=since)
    stages = telemetry.stage_p95_minutes(since=since)
    endpoint_minutes = telemetry.endpoint_minutes(since=since)
    pins = {c["module_type_id"]: (c["driver__version"], c["framework__version"]) for c in
            VersionCombination.objects.filter(state=CombinationState.PINNED).values(
                "module_type_id", "driver__version", "framework__version")}
    node_rows = list(Node.objects.exclude(state=NodeState.RETIRED).values(
        "id", "hostname", "tier_id", "state", "agent_version", "agent_contract"))
    node_by_id = {n["id"]: n for n in node_rows}
    module_rows = list(Module.objects.filter(node__isnull=False).exclude(node__state=NodeState.RETIRED).values(
        "id", "serial", "node_id", "state", "driver_version", "framework_version", "module_type_id",
        "module_type__capabilities", "module_type__power_w", "module_type__pcie_lanes"))

    modules: list[ModuleView] = []
    fresh_utils: dict[int, list[float]] = defaultdict(list)
    module_count: dict[int, int] = defaultdict(int)
    for m in module_rows:
        node = node_by_id[m["node_id"]]
        latest = module_status.get(m["id"]) or {}
        age = _age(now, latest.get("last_seen"))
        serving = m["state"] in (ModuleState.HEALTHY, ModuleState.DEGRADED)
        if serving:
            module_count[m["node_id"]] += 1
            if age is not None and age <= stale_s and latest.get("util") is not None:
                fresh_utils[m["node_id"]].append(float(latest["util"]))
        modules.append(ModuleView(
            id=m["id"], serial=m["serial"], node_id=m["node_id"], tier_id=node["tier_id"], node_state=node["state"],
            state=m["state"], capabilities=frozenset(m["module_type__capabilities"] or ()),
            rated_power_w=float(m["module_type__power_w"]), lanes=int(m["module_type__pcie_lanes"] or 0),
            driver=m["driver_version"], framework=m["framework_version"], pinned=pins.get(m["module_type_id"]),
            age_s=age, latest=latest, baseline=baselines.get(m["id"])))

    nodes: list[NodeView] = []
    for n in node_rows:
        st = node_status.get(n["id"]) or {}
        nodes.append(NodeView(
            id=n["id"], hostname=n["hostname"], tier_id=n["tier_id"], state=n["state"],
            age_s=_age(now, st.get("last_seen")), cpu=st.get("cpu_util"), in_flight=st.get("in_flight"),
            cpu_minutes=cpu_minutes.get(n["id"], []), module_utils=fresh_utils.get(n["id"], []),
            modules=module_count.get(n["id"], 0), overdue_drain=overdue.get(n["id"]),
            agent_version=n["agent_version"], agent_contract=n["agent_contract"]))

    ctx = Context(now=now, stale_s=stale_s)
    cpu_now: dict[int, list[float]] = defaultdict(list)
    peaks: dict[int, dict[dt.datetime, list[float]]] = defaultdict(lambda: defaultdict(list))
    means: dict[int, dict[dt.datetime, list[float]]] = defaultdict(lambda: defaultdict(list))
    for nv in nodes:
        if nv.state not in SERVING_STATES:
            continue
        if nv.cpu is not None and nv.age_s is not None and nv.age_s <= stale_s:
            cpu_now[nv.tier_id].append(nv.cpu)
        for minute, mean, top in nv.cpu_minutes:
            peaks[nv.tier_id][minute].append(top)
            means[nv.tier_id][minute].append(mean)
    ctx.tier_median_cpu = {t: statistics.median(v) for t, v in cpu_now.items()}
    ctx.tier_median_cpu_max = {t: {m: statistics.median(v) for m, v in by.items()} for t, by in peaks.items()}
    ctx.tier_median_cpu_mean = {t: {m: statistics.median(v) for m, v in by.items()} for t, by in means.items()}

    tier_utils: dict[int, list[float]] = defaultdict(list)
    tier_modules: dict[int, int] = defaultdict(int)
    for nv in nodes:
        if nv.state in SERVING_STATES:
            tier_utils[nv.tier_id].extend(nv.module_utils)
            tier_modules[nv.tier_id] += nv.modules
    endpoints: dict[int, list[EndpointView]] = defaultdict(list)
    for e in ExternalEndpoint.objects.filter(enabled=True).order_by("name").values(
            "id", "name", "tier_id", "quota_requests_per_min", "quota_tokens_per_min", "latency_slo_ms"):
        endpoints[e["tier_id"]].append(EndpointView(
            id=e["id"], name=e["name"], tier_id=e["tier_id"], quota_rpm=e["quota_requests_per_min"],
            quota_tpm=e["quota_tokens_per_min"], slo_ms=e["latency_slo_ms"], minutes=endpoint_minutes.get(e["id"], [])))
    tiers = [TierView(id=t["id"], name=t["name"], kind=t["kind"],
                      module_util=statistics.fmean(tier_utils[t["id"]]) if tier_utils[t["id"]] else None,
                      modules=tier_modules[t["id"]], queue_minutes=queues.get(t["id"], []),
                      stage_p95=stages.get(t["id"], {}), endpoints=endpoints.get(t["id"], []))
             for t in Tier.objects.values("id", "name", "kind")]
    return nodes, modules, tiers, ctx


def serving_counts() -> dict[int, dict[str, int]]:
    """Per tier id: serving nodes and serving modules (the safety limits' denominators)."""
    return budget.serving_counts()


# Audit actions that change software or the checks themselves: a storm right after one is suspect.
CHANGE_ACTIONS = ("versioncombination.", "rollout.", "health.check_update", "agent_token.", "module.update",
                  "fault.")


def recent_change(*, before: dt.datetime | None = None) -> AuditEvent | None:
    """The most recent change that could explain many nodes failing at once (from the audit trail)."""
    q = Q()
    for prefix in CHANGE_ACTIONS:
        q |= Q(action__startswith=prefix)
    qs = AuditEvent.objects.filter(q)
    if before is not None:
        qs = qs.filter(time__lte=before)
    return qs.order_by("-time", "-id").first()


# ---- findings ----------------------------------------------------------------------------------


def finding_list() -> QuerySet[Finding]:
    return Finding.objects.select_related("node__tier", "node__rack", "module__node__tier", "module__node__rack",
                                          "tier").order_by("-last_seen", "-id")


def active_silences(*, now: dt.datetime | None = None) -> list[Silence]:
    return list(Silence.objects.filter(expires_at__gt=now or timezone.now()).select_related("node", "tier"))


def is_silenced(finding: Finding, silences: list[Silence]) -> Silence | None:
    for s in silences:
        if s.check_name and s.check_name != finding.check_name:
            continue
        if s.node_id and s.node_id != finding.node_id:
            continue
        if s.tier_id and s.tier_id != finding.tier_id:
            continue
        return s
    return None


def open_findings(*, node: Node | None = None) -> list[Finding]:
    """Open and acknowledged findings, most severe first, then by tier and newest."""
    qs = finding_list().filter(state__in=ACTIVE_FINDING_STATES)
    if node is not None:
        qs = qs.filter(node=node)
    return sorted(qs, key=lambda f: (SEVERITY_ORDER.get(f.severity, 9), f.tier.level if f.tier else 9,
                                     -f.last_seen.timestamp()))


def findings_since(*, node_ids: list[int], since: dt.datetime | None) -> list[Finding]:
    """Active findings on these nodes or their modules first seen at or after ``since`` (all, if None)."""
    qs = finding_list().filter(state__in=ACTIVE_FINDING_STATES).filter(
        Q(node_id__in=node_ids) | Q(module__node_id__in=node_ids))
    if since is not None:
        qs = qs.filter(first_seen__gte=since)
    return list(qs)


def critical_findings(*, node_ids: list[int], except_checks: tuple[str, ...] = ()) -> dict[int, Finding]:
    """Per node id, the active critical finding on the node or one of its modules that has been open
    longest, findings of ``except_checks`` aside (nodes without one are left out)."""
    qs = (finding_list().filter(state__in=ACTIVE_FINDING_STATES, severity=Severity.CRITICAL)
          .filter(Q(node_id__in=node_ids) | Q(module__node_id__in=node_ids)).exclude(check_name__in=except_checks)
          .order_by("first_seen", "id"))
    out: dict[int, Finding] = {}
    for f in qs:
        node_id = f.node_id or (f.module.node_id if f.module is not None else None)
        if node_id is not None:
            out.setdefault(node_id, f)
    return out


# ---- findings as the pages show them -----------------------------------------------------------


@dataclass
class FindingGroup:
    """Findings of one check with one cause (the same evidence where it names the cause): one card on the
    page with its subjects listed, instead of one identical card per module."""

    check_name: str
    severity: str
    status: str
    findings: list[Finding]

    @property
    def lead(self) -> Finding:
        """The first finding in the page's order (most severe, newest): its evidence and advice stand for all."""
        return self.findings[0]

    @property
    def open(self) -> int:
        return sum(f.state == FindingState.OPEN for f in self.findings)

    @property
    def acknowledged(self) -> int:
        return sum(f.state == FindingState.ACKNOWLEDGED for f in self.findings)

    @property
    def same_summary(self) -> bool:
        return len({f.summary for f in self.findings}) == 1

    cause: tuple[str, ...] = ()

    @property
    def subjects(self) -> list[Finding]:
        """The findings by node and module, an order that stays put while the sweeps update them."""
        return sorted(self.findings, key=lambda f: (f.node.hostname if f.node else "", f.module.serial if f.module
                                                    else "", f.subject_key))

    @property
    def key(self) -> str:
        """Names the group across reloads (the page keeps its list open when it re-reads the cards)."""
        return ":".join((self.check_name, self.severity, self.status, *self.cause))


def finding_groups(findings: list[Finding]) -> list[FindingGroup]:
    """``findings`` grouped by check, severity, status and cause, in the order of each group's first finding."""
    groups: dict[tuple[Any, ...], FindingGroup] = {}
    for f in findings:
        k = (f.check_name, f.severity, f.status, cause_of(f.check_name, f.evidence))
        if k not in groups:
            groups[k] = FindingGroup(f.check_name, f.severity, f.status, [], k[3])
        groups[k].findings.append(f)
    return list(groups.values())


def finding_counts(findings: list[Finding]) -> dict[str, int]:
    return {"open": sum(f.state == FindingState.OPEN for f in findings),
            "acknowledged": sum(f.state == FindingState.ACKNOWLEDGED for f in findings)}


def _within(actor: Any, f: Finding, outside_nodes: set[int]) -> bool:
    """Whether the actor's scope holds the finding's subject (its node, else its tier, else the fleet)."""
    if f.node_id:
        return f.node_id not in outside_nodes
    try:
        if f.tier is not None:
            scopes.require_tier(actor=actor, tier=f.tier)
        else:
            scopes.require_fleet(actor=actor, what="a fleet-wide finding")
    except PermissionDenied:
        return False
    return True


def finding_offers(findings: list[Finding], *, actor: Any) -> dict[int, list[dict[str, Any]]]:
    """Per finding id, the actions the page offers on it to ``actor``: the lifecycle actions its advisor's
    remedies name that the module's or node's state allows, then acknowledge (while open) and silence the
    check on its node or tier. None to viewers, none outside the actor's scope (the API would refuse them);
    the API and the lifecycle still decide each one (holds, the capacity guard)."""
    if not has_role(actor, OPERATOR):
        return {}
    nodes = {n.pk: n for n in scopes.nodes_for_check({f.node_id for f in findings if f.node_id})}
    outside = {n.pk for n in scopes.nodes_outside(actor=actor, nodes=nodes.values())}
    offers: dict[int, list[dict[str, Any]]] = {}
    for f in findings:
        if not _within(actor, f, outside):
            continue
        title = CHECKS[f.check_name].title if f.check_name in CHECKS else f.check_name
        node = nodes.get(f.node_id) if f.node_id else None
        mine: list[dict[str, Any]] = []
        for action in remedy_actions(f.check_name):
            if FINDING_ACTIONS[action] == "module" and f.module is not None:
                if action in module_allowed_actions(f.module.state):
                    mine.append({"action": action, "label": action.capitalize(),
                                 "url": f"/api/v1/modules/{f.module_id}/{action}/",
                                 "title": f"{action.capitalize()} module {f.module.serial}",
                                 "text": "No new work on this module; its node serves on its others. The tier's "
                                         "capacity guard and any other hold still decide."})
            elif FINDING_ACTIONS[action] == "node" and node is not None:
                if action in node_allowed_actions(node.state):
                    mine.append({"action": action, "label": f"{action.capitalize()} {node.hostname}",
                                 "url": f"/api/v1/nodes/{node.pk}/{action}/",
                                 "title": f"{action.capitalize()} node {node.hostname}",
                                 "text": ("No new work reaches the node; requests in flight finish."
                                          if action == "cordon" else
                                          "Cordon the node, then wait for its requests in flight to finish.") +
                                         " The tier's capacity floor and any other hold still decide."})
        if f.state == FindingState.OPEN:
            mine.append({"action": "acknowledge", "label": "Acknowledge",
                         "url": f"/api/v1/health/findings/{f.pk}/acknowledge/",
                         "title": f"Acknowledge {title} #{f.pk}", "text": "Say what you are doing about it."})
        where = {"node": node.pk} if node is not None else {"tier": f.tier_id} if f.tier_id else {}
        if where:
            on = node.hostname if node is not None else f.tier.name if f.tier else ""
            mine.append({"action": "silence", "label": "Silence", "url": "/api/v1/health/silences/",
                         "title": f"Silence {title} on {on}", "body": json.dumps({"check": f.check_name, **where}),
                         "text": f"Mutes {title} on {on} (notifications; the finding stays listed, marked "
                                 "silenced) for the hours you set."})
        if f.check_name == BREAKER and f.state in ACTIVE_FINDING_STATES and has_role(actor, ADMIN):
            mine.append({"action": "reset-breaker", "label": "Reset the breaker",
                         "url": f"/api/v1/health/findings/{f.pk}/reset-breaker/",
                         "title": f"Reset the circuit breaker on {f.tier.name if f.tier else 'the fleet'}",
                         "text": "It never resets by itself. Health acts on this tier again from its next sweep, "
                                 "which trips it again if the tier still fails that much. Say what tripped it "
                                 "and what was done."})
        offers[f.pk] = mine
    return offers
