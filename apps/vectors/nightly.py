"""The nightly version-regression check: each pinned combination's suite on a sample of
the serving modules running it.

The sample per pinned combination: ``VECTORS_NIGHTLY_SHARE`` (default 5 %) of its serving
modules, at least ``VECTORS_NIGHTLY_MIN`` (2), one module per node, spread over racks
(round robin, racks with most candidates first), and a different sample each night (the
order is a hash of the date and the serial). Nodes with a module already busy with vectors
are skipped, so a tier never has more than one module per node running vectors. A failed
run flags the combination suspect (beside its state) for the operator to decide.

Change windows and freezes (``apps.operations.windows``, actor ``vector_runs``): a serving node
outside the windows that govern vector runs on it, or under a freeze, is left out of the sample
(and of the versions-changed check) until it may run them; what held it is said in the result.

The remediation budget (``apps.operations.budget``, actor ``vector_runs``): each module a run takes
on a serving node is an automated hold. The sample is cut to what the budget grants per tier (the
rest is held back: the tier's ``budget_held_back`` finding); a versions-changed module held back is
checked on a later pass.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.audit.choices import Source
from apps.health import services as health_services
from apps.inventory import services as inventory_services
from apps.inventory.choices import CombinationState, ModuleState, NodeState
from apps.inventory.models import Module, Node, Tier, VersionCombination
from apps.operations import budget, windows
from apps.operations.choices import WindowActor
from apps.vectors.choices import FINAL_RUN_STATES, Outcome, RunPurpose, RunState, SuiteState
from apps.vectors.models import ModuleCheck, RunTarget, Suite, VectorResult, VectorRun
from apps.vectors.runs import run_create

ACTOR = "vectors-nightly"


def _setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


def nightly_suite() -> Suite | None:
    name = _setting("VECTORS_NIGHTLY_SUITE", "onnx-int8")
    return Suite.objects.filter(name=name, state=SuiteState.PUBLISHED).order_by("-version").first()


def sample_modules(combination: VersionCombination, *, day: dt.date, share: float, minimum: int,
                   busy_nodes: set[int]) -> list[Module]:
    """The night's sample of serving modules on ``combination`` (see the module docstring)."""
    candidates = list(Module.objects.filter(
        module_type=combination.module_type, driver_version=combination.driver.version,
        framework_version=combination.framework.version, state=ModuleState.HEALTHY,
        node__state=NodeState.ACTIVE, node__gray=False).exclude(node_id__in=busy_nodes)
        .select_related("node"))
    if not candidates:
        return []
    want = min(len({m.node_id for m in candidates}), max(minimum, math.ceil(share * len(candidates))))

    def order(m: Module) -> str:
        return hashlib.sha256(f"{day.isoformat()}|{m.serial}".encode()).hexdigest()

    by_rack: dict[int, list[Module]] = defaultdict(list)
    for m in sorted(candidates, key=order):
        assert m.node is not None
        by_rack[m.node.rack_id].append(m)
    racks = sorted(by_rack, key=lambda r: (-len(by_rack[r]), r))
    chosen: list[Module] = []
    nodes: set[int] = set()
    while len(chosen) < want and any(by_rack.values()):
        for rack in racks:
            while by_rack[rack] and by_rack[rack][0].node_id in nodes:
                by_rack[rack].pop(0)
            if by_rack[rack] and len(chosen) < want:
                m = by_rack[rack].pop(0)
                chosen.append(m)
                nodes.add(m.node_id or 0)
    return chosen


def _held(now: dt.datetime) -> dict[int, windows.Verdict]:
    """Serving nodes that change windows or freezes keep vector runs off now."""
    serving = Node.objects.filter(state=NodeState.ACTIVE, gray=False).only("id", "tier_id", "rack_id")
    return windows.held_nodes(actor=WindowActor.VECTOR_RUNS, nodes=serving, at=now)


def nightly_check(*, now: dt.datetime | None = None) -> dict[str, Any]:
    """Start tonight's run per pinned combination (not twice in a day); returns what it did."""
    now = now or timezone.now()
    suite = nightly_suite()
    if suite is None:
        return {"skipped": "no published nightly suite (VECTORS_NIGHTLY_SUITE, default onnx-int8): "
                           "import one with manage.py vectors_import onnx-node"}
    busy = set(RunTarget.objects.exclude(run__state__in=FINAL_RUN_STATES).values_list("node_id", flat=True))
    held = _held(now)
    busy |= set(held)
    started: dict[str, int] = {}
    skipped: dict[str, str] = {}
    for combination in VersionCombination.objects.filter(state=CombinationState.PINNED).select_related(
            "module_type", "driver", "framework"):
        since = now - dt.timedelta(hours=20)
        if VectorRun.objects.filter(combination=combination, purpose=RunPurpose.NIGHTLY,
                                    created_at__gte=since).exists():
            skipped[str(combination)] = "already checked in the last 20 hours"
            continue
        modules = sample_modules(combination, day=now.date(), share=float(_setting("VECTORS_NIGHTLY_SHARE", 0.05)),
                                 minimum=int(_setting("VECTORS_NIGHTLY_MIN", 2)), busy_nodes=busy)
        if not modules:
            reasons = sorted({v.why for v in held.values()})
            skipped[str(combination)] = ("no serving module on it that is free"
                                         + (f"; held by change windows or freezes: {'; '.join(reasons[:3])}"
                                            if reasons else ""))
            continue
        with transaction.atomic():  # the budget's lock is held until the run's targets are stored
            modules, refused = within_budget(modules, now=now, what=f"nightly check of {combination}")
            if not modules:
                skipped[str(combination)] = "held back by the remediation budget: " + "; ".join(
                    v.why for v in refused.values())
                continue
            run = run_create(suite=suite, modules=modules, actor=ACTOR, combination=combination,
                             purpose=RunPurpose.NIGHTLY, source=Source.SYSTEM,
                             reason=f"nightly version-regression check of {combination} on {len(modules)} module(s)")
        busy |= {m.node_id for m in modules if m.node_id is not None}
        started[str(combination)] = run.pk
    return {"started": started, "skipped": skipped}


def within_budget(modules: list[Module], *, now: dt.datetime, what: str
                  ) -> tuple[list[Module], dict[int, budget.Verdict]]:
    """The modules of ``modules`` the remediation budget lets vector runs take now (in the sample's order,
    per tier), and the tiers where it held some back (recorded there). A tier granted all it asked no
    longer has vector runs held back. Call it in the transaction that creates the run."""
    by_tier: dict[int, list[Module]] = defaultdict(list)
    for m in modules:
        assert m.node is not None
        by_tier[m.node.tier_id].append(m)
    tiers = Tier.objects.in_bulk(list(by_tier))
    verdicts = budget.ask_each(actor=WindowActor.VECTOR_RUNS, now=now,
                               asks=[(tiers[t], budget.MODULES, len(group)) for t, group in by_tier.items()])
    kept: list[Module] = []
    refused: dict[int, budget.Verdict] = {}
    for (tier_id, group), verdict in zip(by_tier.items(), verdicts, strict=True):
        kept += group[:verdict.granted]
        if not verdict.allowed:
            refused[tier_id] = verdict
            budget.held_back_record(verdict=verdict, tier=tiers[tier_id], now=now,
                                    wanted=f"{what} on {verdict.held_back} of {len(group)} module(s)")
    budget.held_back_clear(actor=WindowActor.VECTOR_RUNS, tier_ids=[t for t in by_tier if t not in refused], now=now)
    return kept, refused


def versions_changed_check(*, now: dt.datetime | None = None) -> dict[str, Any]:
    """Check serving modules whose versions changed since they were last seen: one module per
    node, nodes busy with vectors skipped (they are taken on a later pass). A module seen for
    the first time is recorded, not checked (the nightly sample covers it)."""
    now = now or timezone.now()
    suite = nightly_suite()
    if suite is None:
        return {"skipped": "no published nightly suite"}
    busy = set(RunTarget.objects.exclude(run__state__in=FINAL_RUN_STATES).values_list("node_id", flat=True))
    busy |= set(_held(now))  # checked on a later pass, once its window opens
    modules = list(Module.objects.filter(state=ModuleState.HEALTHY, node__state=NodeState.ACTIVE, node__gray=False)
                   .select_related("node", "module_type").order_by("node__hostname", "slot"))
    checks = {c.module_id: c for c in ModuleCheck.objects.filter(module__in=modules)}
    new = [ModuleCheck(module=m, driver_version=m.driver_version, framework_version=m.framework_version,
                       checked_at=now) for m in modules if m.pk not in checks]
    ModuleCheck.objects.bulk_create(new, ignore_conflicts=True)
    changed: dict[tuple[int, str, str], list[Module]] = defaultdict(list)
    nodes: set[int] = set()
    for m in modules:
        check = checks.get(m.pk)
        if check is None or (check.driver_version, check.framework_version) == (m.driver_version,
                                                                                   m.framework_version):
            continue
        if m.node_id in busy or m.node_id in nodes:
            continue
        nodes.add(m.node_id or 0)
        changed[(m.module_type_id, m.driver_version, m.framework_version)].append(m)
    started = []
    held_back: dict[str, str] = {}
    for (type_id, driver, framework), group in changed.items():
        combination = VersionCombination.objects.filter(module_type_id=type_id, driver__version=driver,
                                                        framework__version=framework).first()
        with transaction.atomic():  # the budget's lock is held until the run's targets are stored
            # held-back modules keep their last-seen versions: checked on a later pass
            group, refused = within_budget(group, now=now, what=f"versions-changed check (driver {driver} + "
                                                               f"{framework})")
            if refused:
                held_back[f"{driver} + {framework}"] = "; ".join(v.why for v in refused.values())
            if not group:
                continue
            run = run_create(suite=suite, modules=group, actor=ACTOR, combination=combination,
                             purpose=RunPurpose.VERSIONS_CHANGED, source=Source.SYSTEM,
                             reason=f"versions changed to driver {driver} + {framework} on "
                                    + ", ".join(m.serial for m in group[:10]))
            ModuleCheck.objects.filter(module__in=group).update(driver_version=driver, framework_version=framework,
                                                                run=run, checked_at=now)
        started.append(run.pk)
    return {"recorded": len(new), "started": started, **({"held_back": held_back} if held_back else {})}


def after_nightly(run: VectorRun) -> None:
    """A nightly (or versions-changed) run ended: a failure opens a ``vector_regression`` health finding
    on each module that failed and flags its combination suspect (in the run's transaction)."""
    if run.purpose not in (RunPurpose.NIGHTLY, RunPurpose.VERSIONS_CHANGED) or run.state != RunState.FAILED:
        return
    kind = "nightly" if run.purpose == RunPurpose.NIGHTLY else "versions-changed"
    failed: dict[int, list[VectorResult]] = defaultdict(list)
    for result in VectorResult.objects.filter(run=run, outcome=Outcome.FAIL).select_related(
            "vector", "module", "module__node").order_by("module_id", "vector__name"):
        failed[result.module_id].append(result)
    for results in failed.values():
        module = results[0].module
        health_services.finding_report(
            check_name="vector_regression", module=module,
            summary=(f"{kind} vector run #{run.pk}: {len(results)} case(s) failed on {module.serial} "
                     f"(driver {module.driver_version} + {module.framework_version}): "
                     + ", ".join(r.vector.name for r in results[:5])),
            evidence={"run": run.pk, "combination": run.combination_id,
                      "cases": [{"case": r.vector.name, "operator": r.vector.operator,
                                 "max_abs_error": r.max_abs_error} for r in results[:20]]})
    if run.combination is None:
        return
    inventory_services.combination_flag_suspect(
        combination=run.combination, actor=ACTOR, source=Source.SYSTEM,
        reason=f"{'nightly' if run.purpose == RunPurpose.NIGHTLY else 'versions-changed'} vector run #{run.pk} "
               f"failed: {run.message}")
