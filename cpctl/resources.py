"""Each kind ``cpctl get`` lists, declared once: its route, its columns (``table``, and the more of
``wide``), the filters it passes to the API, and how a name on the command line finds one row."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cpctl.output import Column


def key(name: str) -> Callable[[dict[str, Any]], Any]:
    return lambda o: o.get(name)


def _count(name: str) -> Callable[[dict[str, Any]], Any]:
    return lambda o: len(o.get(name) or [])


@dataclass(frozen=True)
class Filter:
    """``--flag VALUE`` on the command line, sent as ``param``; ``many`` repeats it (``--state a
    --state b``); ``lookup`` (a kind) turns a name into the id the API filters by."""

    flag: str
    param: str
    help: str
    many: bool = False
    lookup: str | None = None


@dataclass(frozen=True)
class Kind:
    name: str
    path: str
    columns: tuple[Column, ...]
    wide: tuple[Column, ...] = ()
    filters: tuple[Filter, ...] = ()
    by_name: str | None = None  # the list filter that finds one row by its operators' name
    aliases: tuple[str, ...] = field(default=())


STATE_NODE = Filter("--state", "state", "node state (repeatable): active, cordoned, draining, drained, ...", many=True)

KINDS: dict[str, Kind] = {k.name: k for k in [
    Kind("nodes", "/api/v1/nodes/", aliases=("node", "no"), by_name="hostname",
         columns=(("NAME", key("hostname")), ("STATE", key("state")), ("TIER", key("tier_kind")),
                  ("RACK", key("rack_name")), ("MODULES", key("module_count"))),
         wide=(("SLOT", key("slot")), ("CPU", lambda o: f"{o.get('cpu_cores')}c {o.get('cpu_clock_ghz')}GHz"),
               ("ECC", key("ecc_memory")), ("WARNINGS", _count("warnings")), ("AGENT", lambda o: _agent(o)),
               ("ACTIONS", key("allowed_actions"))),
         filters=(STATE_NODE, Filter("--tier", "tier", "tier kind or id"), Filter("--rack", "rack", "rack name or id"),
                  Filter("--label", "label", "key=value[,key=value]: all must match"),
                  Filter("--search", "search", "text in the hostname"))),
    Kind("modules", "/api/v1/modules/", aliases=("module", "mod"), by_name="serial",
         columns=(("SERIAL", key("serial")), ("NODE", key("node_hostname")), ("SLOT", key("slot")),
                  ("STATE", key("state")), ("DRIVER", key("driver_version")), ("FRAMEWORK", key("framework_version"))),
         wide=(("FIRMWARE", key("firmware_version")), ("PINNED", lambda o: _pin(o)), ("DRIFT", key("drift")),
               ("ACTIONS", key("allowed_actions"))),
         filters=(Filter("--state", "state", "module state (repeatable): healthy, degraded, quarantined, failed",
                         many=True),
                  Filter("--node", "node", "node hostname or id"), Filter("--tier", "tier", "tier kind or id"),
                  Filter("--rack", "rack", "rack name or id"),
                  Filter("--drift", "drift", "true: only modules off their type's pinned versions"))),
    Kind("tiers", "/api/v1/tiers/", aliases=("tier",), by_name="kind",
         columns=(("KIND", key("kind")), ("NAME", key("name")), ("LEVEL", key("level")),
                  ("MIN ACTIVE", key("min_active_nodes")), ("MAX ACTIVE", key("max_active_nodes"))),
         wide=(("ID", key("id")), ("DESCRIPTION", key("description"))),
         filters=(Filter("--kind", "kind", "tier kind"),)),
    Kind("findings", "/api/v1/health/findings/", aliases=("finding",),
         columns=(("ID", key("id")), ("CHECK", key("check")), ("SEVERITY", key("severity")), ("STATE", key("state")),
                  ("SUBJECT", lambda o: o.get("module_serial") or o.get("node_hostname") or o.get("tier_name")
                   or o.get("subject_key")), ("SUMMARY", key("summary"))),
         wide=(("FIRST SEEN", key("first_seen")), ("LAST SEEN", key("last_seen")), ("HOLDS", key("holds"))),
         filters=(Filter("--state", "state", "open, acknowledged, resolved (repeatable)", many=True),
                  Filter("--severity", "severity", "critical, warning, info (repeatable)", many=True),
                  Filter("--check", "check", "the check's name"),
                  Filter("--node", "node", "node hostname", lookup="nodes"),
                  Filter("--tier", "tier", "tier kind", lookup="tiers"))),
    Kind("rollouts", "/api/v1/rollouts/", aliases=("rollout",),
         columns=(("ID", key("id")), ("COMBINATION", key("combination_name")), ("MODULE TYPE", key("module_type_name")),
                  ("STATE", key("state")), ("WAVE", lambda o: f"{o.get('current_wave')}/{o.get('wave_count')}"),
                  ("WAITING FOR", key("waiting_for"))),
         wide=(("STARTED", key("started_at")), ("FINISHED", key("finished_at")), ("REASON", key("reason"))),
         filters=(Filter("--state", "state", "planned, canary, waves, paused, completed, ..."),)),
    Kind("enrolments", "/api/v1/enrolments/", aliases=("enrolment", "enrol"), by_name="hostname",
         columns=(("ID", key("id")), ("NAME", key("hostname")), ("STATE", key("state")), ("RACK", key("rack")),
                  ("SLOT", key("slot")), ("MODULES", _count("modules")),
                  ("HARD RULES", lambda o: "pass" if o.get("passes_hard_rules") else "; ".join(
                      m for ms in ((o.get("verdicts") or {}).get("errors") or {}).values() for m in ms))),
         wide=(("MACHINE ID", key("machine_id")), ("AGENT", key("agent_version")), ("HINT", key("location_hint")),
               ("REJOIN OF", lambda o: o.get("node") if o.get("rejoin") else None),
               ("WARNINGS", lambda o: len((o.get("verdicts") or {}).get("warnings") or [])),
               ("JOINED", key("created_at"))),
         filters=(Filter("--state", "state", "pending, approved, rejected (repeatable)", many=True),)),
    Kind("combinations", "/api/v1/version-combinations/", aliases=("combination", "version-combinations"),
         columns=(("ID", key("id")), ("TYPE ID", key("module_type")), ("DRIVER", key("driver_version")),
                  ("FRAMEWORK", lambda o: f"{o.get('framework_name')} {o.get('framework_version')}"),
                  ("STATE", key("state"))),
         wide=(("SINCE", key("state_changed_at")), ("SUSPECT", key("suspect")), ("NOTES", key("notes"))),
         filters=(Filter("--state", "state", "candidate, validating, validated, pinned, blocked (repeatable)",
                         many=True),
                  Filter("--module-type", "module_type", "module type id"))),
]}

ALIASES = {alias: kind for kind in KINDS.values() for alias in (kind.name, *kind.aliases)}


def _agent(o: dict[str, Any]) -> str | None:
    """The node agent's version and the newest contract it speaks: ``0.9.0/c3``."""
    if not o.get("agent_version"):
        return None
    return o["agent_version"] + (f"/c{o['agent_contract']}" if o.get("agent_contract") is not None else "")


def _pin(o: dict[str, Any]) -> str | None:
    if not o.get("pinned_driver"):
        return None
    return f"{o.get('pinned_driver')}/{o.get('pinned_framework')}"
