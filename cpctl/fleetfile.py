"""``cpctl apply -f fleet.yaml`` and ``cpctl diff -f fleet.yaml``: tiers' active-node bounds,
each module type's pinned versions and change windows (by name), declared in a file and brought
about idempotently (only what differs is sent; a second apply changes nothing)::

    tiers:
      hybrid_inference: {min_active_nodes: 12, max_active_nodes: 42}
    pins:
      AX-40: {driver: 2.4.0, framework: axon-runtime 1.19.0}
    windows:
      weeknights: {cron: "0 22 * * mon-fri", duration_minutes: 240, time_zone: Europe/Berlin,
                   actors: [rollouts, scale_down], tiers: [hybrid_inference], racks: [rack-1]}

Windows the file does not name are left as they are. The server checks a window's cron expression
and time zone (a refusal names the field).

A file that fails validation, in its shape or in what it names on the server, is refused whole
before anything is written, naming the path in the file (``tiers.hybrid: no tier of this kind``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cpctl.client import Client
from cpctl.errors import Refused, UsageError

TIER_FIELDS = ("min_active_nodes", "max_active_nodes")
PIN_FIELDS = ("driver", "framework")
WINDOW_FIELDS = ("cron", "duration_minutes", "time_zone", "actors", "tiers", "racks")
TOP = ("tiers", "pins", "windows")


class FileInvalid(UsageError):
    """The file is wrong: nothing was written (exit 2)."""


@dataclass
class Change:
    path: str           # where in the file
    before: str
    after: str
    request: tuple[str, str, dict[str, Any]] = field(repr=False)  # method, route, body

    def line(self) -> str:
        return f"{self.path}: {self.before} -> {self.after}"


def read(path: Path) -> dict[str, Any]:
    """The file's content, its shape checked (every error names its path in the file)."""
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
    except OSError as exc:
        raise FileInvalid(f"{path}: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise FileInvalid(f"{path}: not valid YAML: {exc}") from exc
    problems = validate(data)
    if problems:
        raise FileInvalid(f"{path} fails validation, nothing was written:\n" + "\n".join(f"  {p}" for p in problems))
    return dict(data)


def validate(data: Any) -> list[str]:
    if not isinstance(data, dict):
        return ["(top): must be a mapping with tiers, pins and/or windows"]
    problems = [f"{k}: unknown key (expected {', '.join(TOP)})" for k in data if k not in TOP]
    tiers = data.get("tiers") or {}
    if not isinstance(tiers, dict):
        problems.append("tiers: must be a mapping of tier kind to its bounds")
        tiers = {}
    for kind, spec in tiers.items():
        where = f"tiers.{kind}"
        if not isinstance(spec, dict) or not spec:
            problems.append(f"{where}: must be a mapping with min_active_nodes and/or max_active_nodes")
            continue
        for key, value in spec.items():
            if key not in TIER_FIELDS:
                problems.append(f"{where}.{key}: unknown key (expected {', '.join(TIER_FIELDS)})")
            elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
                problems.append(f"{where}.{key}: must be a whole number, 0 or more (got {value!r})")
        lo, hi = spec.get("min_active_nodes"), spec.get("max_active_nodes")
        if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
            problems.append(f"{where}: min_active_nodes {lo} is above max_active_nodes {hi}")
    pins = data.get("pins") or {}
    if not isinstance(pins, dict):
        problems.append("pins: must be a mapping of module type to its driver and framework")
        pins = {}
    for mtype, spec in pins.items():
        where = f"pins.{mtype}"
        if not isinstance(spec, dict):
            problems.append(f"{where}: must be a mapping with driver and framework")
            continue
        for key in spec:
            if key not in PIN_FIELDS:
                problems.append(f"{where}.{key}: unknown key (expected driver, framework)")
        for key in PIN_FIELDS:
            value = spec.get(key)
            if not isinstance(value, str | int | float) or isinstance(value, bool) or not str(value).strip():
                want = "a name and version, e.g. axon-runtime 1.19.0" if key == "framework" else "a version, e.g. 2.4.0"
                problems.append(f"{where}.{key}: missing ({want})")
        framework = str(spec.get("framework") or "")
        if framework and len(framework.split()) < 2:
            problems.append(f"{where}.framework: name and version, e.g. 'axon-runtime 1.19.0' (got {framework!r})")
    return problems + _validate_windows(data.get("windows") or {})


def _validate_windows(windows: Any) -> list[str]:
    if not isinstance(windows, dict):
        return ["windows: must be a mapping of window name to its cron, duration_minutes and actors"]
    problems: list[str] = []
    for name, spec in windows.items():
        where = f"windows.{name}"
        if not isinstance(spec, dict):
            problems.append(f"{where}: must be a mapping with cron, duration_minutes and actors")
            continue
        problems += [f"{where}.{k}: unknown key (expected {', '.join(WINDOW_FIELDS)})" for k in spec
                     if k not in WINDOW_FIELDS]
        if not isinstance(spec.get("cron"), str) or not spec["cron"].strip():
            problems.append(f"{where}.cron: missing (five fields, e.g. '0 22 * * mon-fri')")
        minutes = spec.get("duration_minutes")
        if isinstance(minutes, bool) or not isinstance(minutes, int) or minutes < 1:
            problems.append(f"{where}.duration_minutes: must be a whole number of minutes, 1 or more (got {minutes!r})")
        if "time_zone" in spec and (not isinstance(spec["time_zone"], str) or not spec["time_zone"].strip()):
            problems.append(f"{where}.time_zone: an IANA name such as Europe/Berlin (got {spec['time_zone']!r})")
        for key in ("actors", "tiers", "racks"):
            value = spec.get(key, [] if key != "actors" else None)
            if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
                problems.append(f"{where}.{key}: must be a list of names (got {value!r})")
            elif key == "actors" and not value:
                problems.append(f"{where}.actors: name at least one (rollouts, scale_down, health_actions, "
                                "vector_runs)")
    return problems


def _plan_windows(client: Client, windows: dict[str, Any], tiers: dict[str, Any], *, reason: str,
                  problems: list[str]) -> list[Change]:
    """The windows to create or change: each named in the file, compared field by field."""
    if not windows:
        return []
    existing = {w["name"]: w for w in client.list("/api/v1/change-windows/")}
    racks = ({r["name"]: r for r in client.list("/api/v1/racks/")}
             if any(spec.get("racks") for spec in windows.values()) else {})
    changes: list[Change] = []
    for name, spec in windows.items():
        where = f"windows.{name}"
        unknown = [f"tier {t}" for t in spec.get("tiers", []) if t not in tiers] + [
            f"rack {r}" for r in spec.get("racks", []) if r not in racks]
        if unknown:
            problems.append(f"{where}: no {', no '.join(unknown)} on the server")
            continue
        body: dict[str, Any] = {
            "cron": spec["cron"].strip(), "duration_minutes": spec["duration_minutes"],
            "time_zone": str(spec.get("time_zone", "UTC")).strip(), "actors": sorted(spec["actors"]),
            "tiers": sorted(tiers[t]["id"] for t in spec.get("tiers", [])),
            "racks": sorted(racks[r]["id"] for r in spec.get("racks", []))}
        now = existing.get(name)
        if now is None:
            changes.append(Change(where, "absent", f"{body['cron']} for {body['duration_minutes']} min "
                                                   f"({body['time_zone']}): {', '.join(body['actors'])}",
                                  ("POST", "/api/v1/change-windows/", {"name": name, **body, "reason": reason})))
            continue
        current = {k: sorted(now[k]) if isinstance(now[k], list) else now[k] for k in body}
        differs = {k: v for k, v in body.items() if current[k] != v}
        if differs:
            changes.append(Change(where, ", ".join(f"{k} {current[k]}" for k in differs),
                                  ", ".join(f"{k} {v}" for k, v in differs.items()),
                                  ("PATCH", f"/api/v1/change-windows/{now['id']}/", {**differs, "reason": reason})))
    return changes


def plan(client: Client, data: dict[str, Any], *, reason: str) -> list[Change]:
    """What differs between the file and the server, as the requests that would fix it. Every name
    is looked up first: one the server does not know fails the whole file."""
    problems: list[str] = []
    changes: list[Change] = []
    tiers = {t["kind"]: t for t in client.list("/api/v1/tiers/")}
    for kind, spec in (data.get("tiers") or {}).items():
        tier = tiers.get(kind)
        if tier is None:
            problems.append(f"tiers.{kind}: no tier of this kind (known: {', '.join(sorted(tiers))})")
            continue
        body = {k: v for k, v in spec.items() if tier.get(k) != v}
        if body:
            before = ", ".join(f"{k} {tier.get(k)}" for k in body)
            after = ", ".join(f"{k} {v}" for k, v in body.items())
            changes.append(Change(f"tiers.{kind}", before, after, ("PATCH", f"/api/v1/tiers/{tier['id']}/", body)))
    pins = data.get("pins") or {}
    types = list(client.list("/api/v1/module-types/")) if pins else []
    for name, spec in pins.items():
        where = f"pins.{name}"
        matches = [t for t in types if str(name) in (t["model"], f"{t['vendor']} {t['model']}")]
        if len(matches) != 1:
            problems.append(f"{where}: {'no' if not matches else 'more than one'} module type "
                            f"{'is' if not matches else 'are'} named so (by model, or vendor and model)")
            continue
        combos = list(client.list("/api/v1/version-combinations/", {"module_type": matches[0]["id"]}))
        driver = str(spec["driver"]).strip()
        fw_name, fw_version = str(spec["framework"]).strip().rsplit(None, 1)
        wanted = [c for c in combos if c["driver_version"] == driver and c["framework_name"] == fw_name
                  and c["framework_version"] == fw_version]
        if not wanted:
            problems.append(f"{where}: no version combination {driver} + {fw_name} {fw_version} for this module type")
            continue
        combo = wanted[0]
        if combo["state"] == "pinned":
            continue
        pinned = [c for c in combos if c["state"] == "pinned"]
        before = (f"{pinned[0]['driver_version']} + {pinned[0]['framework_name']} {pinned[0]['framework_version']}"
                  if pinned else "no pin")
        changes.append(Change(where, before, f"{driver} + {fw_name} {fw_version} ({combo['state']} now)",
                              ("POST", f"/api/v1/version-combinations/{combo['id']}/set-state/",
                               {"state": "pinned", "reason": reason})))
    changes += _plan_windows(client, data.get("windows") or {}, tiers, reason=reason, problems=problems)
    if problems:
        raise FileInvalid("the file names what the server does not have, nothing was written:\n"
                          + "\n".join(f"  {p}" for p in problems))
    return changes


def apply(client: Client, changes: list[Change]) -> list[tuple[Change, Refused | None]]:
    """Send each change in order; a refused one does not stop the others."""
    done: list[tuple[Change, Refused | None]] = []
    for change in changes:
        method, route, body = change.request
        try:
            if method == "PATCH":
                client.patch(route, body)
            else:
                client.act(route, body)
            done.append((change, None))
        except Refused as exc:
            done.append((change, exc))
    return done
