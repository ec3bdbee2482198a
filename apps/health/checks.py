"""The health checks: pure functions over one node's, module's or tier's recent
telemetry (latest state and the last minutes of rollups, gathered by the sweep in
a few set-based reads), no Django, no I/O. Each returns an ``Outcome``: pass, warn,
fail or unknown with the numbers it judged, or None where the check does not apply
(the node is in maintenance, the module type lacks the capability).

A check that cannot judge (no fresh telemetry, no rollups yet) says ``unknown``,
never ``pass``. Defaults come from docs/domain.md; operators edit them (the
``HealthCheck`` rows)."""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apps.agents.contract import CURRENT
from apps.health.choices import Evidence, Policy, Severity, SubjectKind
from apps.health.inputs import (
    FAIL,
    PASS,
    UNKNOWN,
    WARN,
    Context,
    EndpointView,
    ModuleView,
    NodeView,
    Outcome,
    TierView,
)
from apps.inventory.choices import SERVING_STATES, NodeState

# Node states a node reports in (the heartbeat's): maintenance, failed and retired nodes are not checked.
WATCHED_NODE_STATES = frozenset({NodeState.STANDBY, NodeState.ACTIVE, NodeState.CORDONED, NodeState.DRAINING,
                                 NodeState.DRAINED, NodeState.UNREACHABLE})


def _fresh_node(n: NodeView, ctx: Context) -> Outcome | None:
    if n.age_s is None or n.age_s > ctx.stale_s:
        what = "no report yet" if n.age_s is None else f"last report {n.age_s:.0f} s ago"
        return Outcome(UNKNOWN, f"no fresh telemetry ({what})", {"age_s": n.age_s}, stale=True)
    return None


def _fresh_module(m: ModuleView, ctx: Context) -> Outcome | None:
    if m.age_s is None or m.age_s > ctx.stale_s:
        what = "no report yet" if m.age_s is None else f"last report {m.age_s:.0f} s ago"
        return Outcome(UNKNOWN, f"no fresh telemetry ({what})", {"age_s": m.age_s}, stale=True)
    return None


def _r(x: float | None, d: int = 3) -> float | None:
    return None if x is None else round(float(x), d)


# ---- node checks -------------------------------------------------------------------------------


def heartbeat(n: NodeView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    if n.state not in WATCHED_NODE_STATES:
        return None
    timeout = float(p["timeout_s"])
    ev = {"last_report_s": _r(n.age_s, 1), "timeout_s": timeout, "state": n.state}
    if n.state == NodeState.UNREACHABLE or n.age_s is None or n.age_s > timeout:
        silent = "never reported" if n.age_s is None else f"silent for {n.age_s:.0f} s"
        return Outcome(FAIL, f"{n.hostname} {silent} (timeout {timeout:g} s), {n.state}", ev,
                       score=(n.age_s or 1e6) / timeout)
    return Outcome(PASS, f"last report {n.age_s:.0f} s ago", ev)


def agent_contract(n: NodeView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    """An agent whose newest contract is older than the server's: accepted, but due an upgrade."""
    if n.state not in WATCHED_NODE_STATES or n.agent_contract is None:
        return None  # an agent that does not say which contract it speaks is not judged
    ev = {"agent_version": n.agent_version, "agent_contract": n.agent_contract, "server_contract": CURRENT}
    if n.agent_contract < CURRENT:
        return Outcome(FAIL, f"{n.hostname}'s agent cp-agent {n.agent_version} speaks contract {n.agent_contract} "
                             f"at most; this server speaks {CURRENT}", ev)
    return Outcome(PASS, f"agent cp-agent {n.agent_version} speaks contract {n.agent_contract}", ev)


def cpu_bound(n: NodeView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    if n.state not in SERVING_STATES:
        return None
    if (stale := _fresh_node(n, ctx)) is not None:
        return stale
    assert n.cpu is not None
    cpu_min, module_max = float(p["cpu_min"]), float(p["module_util_max"])
    ev: dict[str, Any] = {"cpu_util": _r(n.cpu), "cpu_min": cpu_min}
    if n.modules:
        if not n.module_utils:
            return Outcome(UNKNOWN, "no fresh module utilisation", ev)
        util = statistics.fmean(n.module_utils)
        ev.update(module_util=_r(util), module_util_max=module_max)
        bad = n.cpu >= cpu_min and util <= module_max
        text = f"CPU {n.cpu:.0%} while its modules run at {util:.0%}"
    else:
        median = ctx.tier_median_cpu.get(n.tier_id)
        if median is None:
            return Outcome(UNKNOWN, "no tier median to compare with", ev)
        tier_max = float(p["tier_median_max"])
        ev.update(tier_median_cpu=_r(median), tier_median_max=tier_max)
        bad = n.cpu >= cpu_min and median <= tier_max
        text = f"CPU {n.cpu:.0%} while the tier's median node runs at {median:.0%}"
    return Outcome(FAIL if bad else PASS, text, ev, score=n.cpu)


def noisy_neighbour(n: NodeView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    """Spike minutes: the node's CPU peak stands ``amplitude`` above the peak of the tier's median node
    in the same minute (its twins do not show it, so a fleet-wide surge is not blamed on one node) and
    half of it above its own mean of the minute, while that mean stays near the median node's (a
    transient, not a step to a sustained load: that is cpu_bound's). The latest report counts as the
    current minute when it stands ``amplitude`` above the tier's median node now, the node's newest
    minute was calm and the minute before is not a spike already (a step up is not two spikes)."""
    if n.state not in SERVING_STATES:
        return None
    if (stale := _fresh_node(n, ctx)) is not None:
        return stale
    amp, window, need = float(p["amplitude"]), int(p["window_min"]), int(p["min_spikes"])
    start = ctx.now.replace(second=0, microsecond=0) - dt.timedelta(minutes=window - 1)
    medians = ctx.tier_median_cpu_max.get(n.tier_id, {})
    median_means = ctx.tier_median_cpu_mean.get(n.tier_id, {})
    minutes = [(m, mean, top) for m, mean, top in n.cpu_minutes if m >= start]
    if not minutes:
        return Outcome(UNKNOWN, f"no minute rollups in the last {window} min", {"window_min": window})

    def calm(m: dt.datetime, mean: float) -> bool:
        return mean - median_means.get(m, mean) < amp

    spikes = [m for m, mean, top in minutes
              if top - mean >= amp / 2 and top - medians.get(m, top) >= amp and calm(m, mean)]
    current = ctx.now.replace(second=0, microsecond=0)
    median_now = ctx.tier_median_cpu.get(n.tier_id)
    newest = minutes[-1]
    if (current not in spikes and current - dt.timedelta(minutes=1) not in spikes and n.cpu is not None
            and median_now is not None and n.cpu - median_now >= amp
            and newest[1] - median_means.get(newest[0], newest[1]) < amp / 2):
        spikes.append(current)
    if len(spikes) < need:
        return Outcome(PASS, f"{len(spikes)} CPU spike minute(s) in {window} min")
    ev = {"spike_minutes": [m.strftime("%H:%M") for m in sorted(spikes)], "window_min": window,
          "amplitude": amp, "min_spikes": need,
          "peaks_vs_tier_median": [[m.strftime("%H:%M"), _r(top), _r(medians.get(m))] for m, _, top in minutes]}
    text = (f"{len(spikes)} CPU spike minute(s) in {window} min that the tier's median node does not show "
            f"(≥ {amp:.0%} above it)")
    return Outcome(FAIL, text, ev, score=len(spikes))


def drain_deadline(n: NodeView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    """A drain whose deadline passed with requests still in flight (and set to alert, not force)."""
    d = n.overdue_drain
    if d is None:
        return Outcome(PASS, "no drain past its deadline") if n.state == NodeState.DRAINING else None
    who = d.get("created_by_name") or d["owner"]
    late = (ctx.now - d["deadline"]).total_seconds() if d.get("deadline") else 0.0
    ev = {"drain": d["pk"], "owner": d["owner"], "by": who, "reason": d["reason"], "in_flight": n.in_flight,
          "deadline": d["deadline"].isoformat() if d.get("deadline") else None, "late_s": round(late)}
    return Outcome(FAIL, f"drain by {d['owner']} ({who}: {d['reason']!r}) passed its deadline {late:.0f} s ago with "
                         f"{n.in_flight if n.in_flight is not None else 'an unknown number of'} requests in flight",
                   ev, score=late)


# ---- module checks -----------------------------------------------------------------------------


def _counter_delta(m: ModuleView, key: str, ctx: Context) -> tuple[float, float] | None:
    """(growth of counter ``key`` since the window's first rollup, minutes it covers), None: no rollups."""
    if m.baseline is None or m.baseline.get(key) is None or m.latest.get(key) is None:
        return None
    minutes = max(1.0, (ctx.now - m.baseline["first_minute"]).total_seconds() / 60)
    return max(0.0, float(m.latest[key]) - float(m.baseline[key])), minutes


def ecc(m: ModuleView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    if (stale := _fresh_module(m, ctx)) is not None:
        return stale
    corrected = _counter_delta(m, "ecc_corrected", ctx)
    uncorrected = _counter_delta(m, "ecc_uncorrected", ctx)
    if corrected is None or uncorrected is None:
        return Outcome(UNKNOWN, f"no ECC counters or no minute rollups in the last {p['window_min']} min")
    rate = corrected[0] / corrected[1]
    limit = float(p["corrected_per_min"])
    ev = {"corrected_per_min": round(rate, 1), "corrected_limit_per_min": limit, "new_uncorrected": int(uncorrected[0]),
          "over_min": round(corrected[1], 1), "ecc_corrected": m.latest["ecc_corrected"],
          "ecc_uncorrected": m.latest["ecc_uncorrected"]}
    if uncorrected[0] > 0:
        return Outcome(FAIL, f"{int(uncorrected[0])} uncorrected ECC error(s) in {uncorrected[1]:.0f} min; corrected "
                             f"{rate:.1f}/min", ev, severity=Severity.CRITICAL.value, score=100 + uncorrected[0])
    if rate >= limit:
        return Outcome(FAIL, f"corrected ECC errors rising: {rate:.1f}/min (limit {limit:g}/min)", ev,
                       score=rate / limit)
    return Outcome(PASS, f"corrected ECC {rate:.1f}/min, no uncorrected", ev)


def link_width(m: ModuleView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    if (stale := _fresh_module(m, ctx)) is not None:
        return stale
    width = m.latest.get("link_width")
    expected = m.lanes or m.latest.get("link_width_expected")
    if width is None or not expected:
        return Outcome(UNKNOWN, "no link width reported")
    ev = {"link_width": width, "expected": expected}
    if width < expected:
        return Outcome(FAIL, f"PCIe link trained at x{width}, expected x{expected}", ev, score=expected / max(1, width))
    return Outcome(PASS, f"PCIe link x{width}", ev)


def temperature(m: ModuleView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    if (stale := _fresh_module(m, ctx)) is not None:
        return stale
    temp = m.latest.get("temp_c")
    if temp is None:
        return Outcome(UNKNOWN, "no temperature reported")
    warn, limit = float(p["warn_c"]), float(p["max_c"])
    ev = {"temp_c": temp, "warn_c": warn, "max_c": limit}
    status = FAIL if temp >= limit else WARN if temp >= warn else PASS
    return Outcome(status, f"{temp:.1f} °C (throttles at {limit:g} °C)", ev, score=temp / limit)


def power(m: ModuleView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    if (stale := _fresh_module(m, ctx)) is not None:
        return stale
    watts = m.latest.get("power_w")
    if watts is None:
        return Outcome(UNKNOWN, "no power reported")
    limit = m.rated_power_w * float(p["max_ratio"])
    ev = {"power_w": watts, "rated_w": m.rated_power_w, "limit_w": round(limit, 1)}
    status = FAIL if watts > limit else PASS
    return Outcome(status, f"{watts:.1f} W (rated {m.rated_power_w:g} W, limit {limit:.1f} W)", ev,
                   score=watts / limit if limit else 0)


def module_errors(m: ModuleView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    if (stale := _fresh_module(m, ctx)) is not None:
        return stale
    delta = _counter_delta(m, "errors", ctx)
    if delta is None:
        return Outcome(UNKNOWN, f"no error counter or no minute rollups in the last {p['window_min']} min")
    allowed = int(p["max_new"])
    ev = {"new_errors": int(delta[0]), "over_min": round(delta[1], 1), "max_new": allowed,
          "errors": m.latest.get("errors")}
    if delta[0] > allowed:
        return Outcome(FAIL, f"{int(delta[0])} new module errors in {delta[1]:.0f} min", ev, score=delta[0])
    return Outcome(PASS, f"{int(delta[0])} new module errors in {delta[1]:.0f} min", ev)


ON_PIN = Outcome(PASS, "on the pinned combination")


def version_drift(m: ModuleView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    if m.pinned is None:
        return None
    if (m.driver, m.framework) == m.pinned:
        return ON_PIN
    ev = {"driver": m.driver, "framework": m.framework, "pinned_driver": m.pinned[0], "pinned_framework": m.pinned[1]}
    if (m.driver, m.framework) != m.pinned:
        return Outcome(FAIL, f"driver {m.driver} + framework {m.framework}, pinned {m.pinned[0]} + {m.pinned[1]}",
                       ev, score=1)
    return Outcome(PASS, "on the pinned combination", ev)


# ---- tier checks -------------------------------------------------------------------------------


def stage_latency(t: TierView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    targets: dict[str, float] = p["p95_ms"]
    window = int(p["window_min"])
    if not t.stage_p95:
        return Outcome(UNKNOWN, f"no stage latency rollups in the last {window} min")
    over: dict[str, list[float]] = {}
    seen: dict[str, float] = {}
    for stage, values in t.stage_p95.items():
        target = targets.get(f"{t.kind}.{stage}", targets.get(stage))
        if target is None or not values:
            continue
        median = statistics.median(values)
        seen[stage] = round(median, 1)
        if median > float(target):
            over[stage] = [round(median, 1), float(target)]
    ev = {"p95_ms": seen, "over_target": over, "window_min": window}
    if over:
        text = ", ".join(f"{s} p95 {v:.0f} ms > {tg:g} ms" for s, (v, tg) in over.items())
        return Outcome(FAIL, text, ev, score=max(v / tg for v, tg in over.values()))
    return Outcome(PASS, "every stage within its p95 target", ev)


def low_util_queue(t: TierView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    if not t.modules:
        return None
    if t.module_util is None or len(t.queue_minutes) < 2:
        return Outcome(UNKNOWN, "no fresh module utilisation or fewer than two minutes of queue rollups")
    first, last = t.queue_minutes[0][1], t.queue_minutes[-1][1]
    # At least min_queue waiting, and at least per_module for each module serving the tier: below
    # that a bigger tier's queue is the ordinary wait of rising load, not work stuck before inference.
    util_max, growth = float(p["util_max"]), float(p["growth"])
    min_queue = max(float(p["min_queue"]), float(p["per_module"]) * t.modules)
    ev = {"module_util": _r(t.module_util), "util_max": util_max, "queue_first": _r(first, 1),
          "queue_last": _r(last, 1), "growth": growth, "min_queue": min_queue}
    bad = t.module_util < util_max and last >= min_queue and last >= first * growth
    text = (f"modules at {t.module_util:.0%} while the queue grew from {first:.0f} to {last:.0f}" if bad else
            f"modules at {t.module_util:.0%}, queue {first:.0f} → {last:.0f}")
    return Outcome(FAIL if bad else PASS, text, ev, score=last / max(1.0, first))


# ---- external endpoint checks (tier 3) -----------------------------------------------------------


def _endpoint_window(e: EndpointView, p: dict[str, Any], ctx: Context) -> list[dict[str, Any]]:
    start = ctx.now.replace(second=0, microsecond=0) - dt.timedelta(minutes=int(p["window_min"]) - 1)
    return [m for m in e.minutes if start <= m["minute"] <= ctx.now]


def _no_figures(e: EndpointView, p: dict[str, Any]) -> Outcome:
    return Outcome(UNKNOWN, f"the gateway reported no figures of {e.name} in the last {p['window_min']} min",
                   {"endpoint": e.name, "window_min": int(p["window_min"])})


def endpoint_latency(e: EndpointView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    """The median of the endpoint's per-minute p95 over the window (minutes with requests) above its SLO.
    Too few requests to judge (fewer than ``min_requests``): no evaluation."""
    minutes = _endpoint_window(e, p, ctx)
    if not minutes:
        return _no_figures(e, p)
    requests = sum(m["requests"] for m in minutes)
    p95s = [float(m["p95_ms"]) for m in minutes if m["requests"] and m["p95_ms"] is not None]
    if requests < int(p["min_requests"]) or not p95s:
        return None
    p95 = statistics.median(p95s)
    ev = {"endpoint": e.name, "p95_ms": round(p95, 1), "slo_ms": e.slo_ms, "requests": requests,
          "window_min": int(p["window_min"]), "p95_per_minute": [_r(x, 1) for x in p95s]}
    if p95 > e.slo_ms:
        return Outcome(FAIL, f"{e.name}: p95 {p95:.0f} ms over its SLO of {e.slo_ms} ms ({requests} requests in "
                             f"{p['window_min']} min)", ev, score=p95 / e.slo_ms)
    return Outcome(PASS, f"{e.name}: p95 {p95:.0f} ms within its SLO of {e.slo_ms} ms", ev)


def endpoint_errors(e: EndpointView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    """Failed requests over requests in the window at or above ``max_error_rate``. Too few requests to
    judge (fewer than ``min_requests``): no evaluation."""
    minutes = _endpoint_window(e, p, ctx)
    if not minutes:
        return _no_figures(e, p)
    requests = sum(m["requests"] for m in minutes)
    errors = sum(m["errors"] for m in minutes)
    if requests < int(p["min_requests"]):
        return None
    rate, limit = errors / requests, float(p["max_error_rate"])
    ev = {"endpoint": e.name, "error_rate": round(rate, 4), "max_error_rate": limit, "errors": errors,
          "requests": requests, "window_min": int(p["window_min"])}
    if rate >= limit:
        return Outcome(FAIL, f"{e.name}: {rate:.1%} of requests failed ({errors} of {requests} in {p['window_min']} "
                             f"min; limit {limit:.1%})", ev, score=rate / limit if limit else rate)
    return Outcome(PASS, f"{e.name}: {rate:.1%} of requests failed", ev)


def endpoint_quota(e: EndpointView, p: dict[str, Any], ctx: Context) -> Outcome | None:
    """Requests and tokens per minute over the window (summed counts over the seconds covered) against the
    endpoint's quotas: warn when the headroom left is below ``warn_headroom``, fail below ``min_headroom``,
    critical once a quota is used up, so there is time to spill over or raise the quota before it runs out."""
    minutes = _endpoint_window(e, p, ctx)
    seconds = sum(float(m["window_s"]) for m in minutes)
    if not minutes or seconds <= 0:
        return _no_figures(e, p)
    rpm = sum(m["requests"] for m in minutes) / seconds * 60
    tpm = sum(m["tokens"] for m in minutes) / seconds * 60
    used = {"requests": rpm / e.quota_rpm if e.quota_rpm else 0.0,
            "tokens": tpm / e.quota_tpm if e.quota_tpm else 0.0}
    which = max(used, key=lambda k: used[k])
    headroom = 1 - used[which]
    warn, fail = float(p["warn_headroom"]), float(p["min_headroom"])
    ev = {"endpoint": e.name, "requests_per_min": round(rpm, 1), "quota_requests_per_min": e.quota_rpm,
          "tokens_per_min": round(tpm), "quota_tokens_per_min": e.quota_tpm,
          "used": {k: round(v, 3) for k, v in used.items()}, "headroom": round(headroom, 3), "binding": which,
          "warn_headroom": warn, "min_headroom": fail, "window_min": int(p["window_min"]),
          "requests_per_minute": [_r(m["requests"] / m["window_s"] * 60 if m["window_s"] else 0.0, 1)
                                  for m in minutes]}
    figure = (f"{rpm:.0f} of {e.quota_rpm} requests/min" if which == "requests"
              else f"{tpm:.0f} of {e.quota_tpm} tokens/min")
    text = f"{e.name}: {figure} ({used[which]:.0%} of its {which} quota, {max(0.0, headroom):.0%} headroom)"
    if headroom <= 0:
        return Outcome(FAIL, text, ev, severity=Severity.CRITICAL.value, score=used[which])
    status = FAIL if headroom < fail else WARN if headroom < warn else PASS
    return Outcome(status, text, ev, score=used[which])


# ---- the registry ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckDef:
    name: str
    title: str
    subject: str
    fn: Callable[..., Outcome | None]
    evidence: str
    severity: str
    defaults: dict[str, Any]
    # Numeric parameters' allowed ranges (inclusive); dict parameters hold numbers in the first range.
    limits: dict[str, tuple[float, float]]
    policy: str = Policy.ALERT.value
    capability: str | None = None
    window_key: str | None = None  # the parameter naming the window (minutes) of rollups it reads


CHECKS: dict[str, CheckDef] = {c.name: c for c in [
    CheckDef("heartbeat", "Heartbeat", SubjectKind.NODE.value, heartbeat, Evidence.LATEST.value,
             Severity.CRITICAL.value, {"timeout_s": 30}, {"timeout_s": (1, 3600)}),
    CheckDef("cpu_bound", "CPU-bound node", SubjectKind.NODE.value, cpu_bound, Evidence.LATEST.value,
             Severity.WARNING.value, {"cpu_min": 0.9, "module_util_max": 0.1, "tier_median_max": 0.6},
             {"cpu_min": (0, 1), "module_util_max": (0, 1), "tier_median_max": (0, 1)}),
    CheckDef("noisy_neighbour", "Noisy neighbour", SubjectKind.NODE.value, noisy_neighbour,
             Evidence.LATEST_AND_ROLLUPS.value, Severity.WARNING.value,
             {"amplitude": 0.2, "window_min": 5, "min_spikes": 2},
             {"amplitude": (0.01, 1), "window_min": (1, 60), "min_spikes": (1, 60)}, window_key="window_min"),
    CheckDef("drain_deadline", "Drain past its deadline", SubjectKind.NODE.value, drain_deadline,
             Evidence.OPERATIONS.value, Severity.WARNING.value, {}, {}),
    CheckDef("agent_contract", "Old node agent", SubjectKind.NODE.value, agent_contract, Evidence.AGENTS.value,
             Severity.INFO.value, {}, {}, policy=Policy.OBSERVE.value),
    CheckDef("ecc", "ECC errors", SubjectKind.MODULE.value, ecc, Evidence.LATEST_AND_ROLLUPS.value,
             Severity.WARNING.value, {"corrected_per_min": 10, "window_min": 3},
             {"corrected_per_min": (0.1, 1e6), "window_min": (1, 60)}, capability="ecc", window_key="window_min"),
    CheckDef("link_width", "PCIe link width", SubjectKind.MODULE.value, link_width, Evidence.LATEST.value,
             Severity.WARNING.value, {}, {}, capability="link_width"),
    CheckDef("temperature", "Temperature", SubjectKind.MODULE.value, temperature, Evidence.LATEST.value,
             Severity.WARNING.value, {"warn_c": 80, "max_c": 85}, {"warn_c": (20, 150), "max_c": (20, 150)},
             capability="temperature"),
    CheckDef("power", "Power draw", SubjectKind.MODULE.value, power, Evidence.LATEST.value, Severity.WARNING.value,
             {"max_ratio": 1.1}, {"max_ratio": (0.5, 5)}, capability="power"),
    CheckDef("module_errors", "Module errors", SubjectKind.MODULE.value, module_errors,
             Evidence.LATEST_AND_ROLLUPS.value, Severity.WARNING.value, {"max_new": 0, "window_min": 3},
             {"max_new": (0, 1e9), "window_min": (1, 60)}, capability="errors", window_key="window_min"),
    CheckDef("version_drift", "Version drift", SubjectKind.MODULE.value, version_drift, Evidence.INVENTORY.value,
             Severity.INFO.value, {}, {}, policy=Policy.OBSERVE.value),
    CheckDef("stage_latency", "Stage latency SLO", SubjectKind.TIER.value, stage_latency, Evidence.ROLLUPS.value,
             Severity.WARNING.value,
             {"window_min": 3, "p95_ms": {"perception": 400, "intent": 800, "planning": 600, "tool_call": 2000,
                                          "generation": 2500, "memory_update": 400,
                                          "external_large_model.generation": 6000}},
             {"window_min": (1, 60), "p95_ms": (1, 600000)}, window_key="window_min"),
    CheckDef("low_util_queue", "Low accelerator utilisation, growing queue", SubjectKind.TIER.value,
             low_util_queue, Evidence.LATEST_AND_ROLLUPS.value, Severity.WARNING.value,
             {"util_max": 0.3, "growth": 1.5, "min_queue": 10, "per_module": 1.0, "window_min": 3},
             {"util_max": (0, 1), "growth": (1, 100), "min_queue": (0, 1e9), "per_module": (0, 1e6),
              "window_min": (2, 60)},
             window_key="window_min"),
    CheckDef("endpoint_latency", "Endpoint latency SLO", SubjectKind.ENDPOINT.value, endpoint_latency,
             Evidence.ENDPOINT_MINUTES.value, Severity.WARNING.value, {"window_min": 3, "min_requests": 20},
             {"window_min": (1, 60), "min_requests": (1, 1e9)}, window_key="window_min"),
    CheckDef("endpoint_errors", "Endpoint error rate", SubjectKind.ENDPOINT.value, endpoint_errors,
             Evidence.ENDPOINT_MINUTES.value, Severity.WARNING.value,
             {"max_error_rate": 0.05, "window_min": 3, "min_requests": 20},
             {"max_error_rate": (0.0001, 1), "window_min": (1, 60), "min_requests": (1, 1e9)},
             window_key="window_min"),
    CheckDef("endpoint_quota", "Endpoint quota headroom", SubjectKind.ENDPOINT.value, endpoint_quota,
             Evidence.ENDPOINT_MINUTES.value, Severity.WARNING.value,
             {"warn_headroom": 0.2, "min_headroom": 0.1, "window_min": 3},
             {"warn_headroom": (0, 1), "min_headroom": (0, 1), "window_min": (1, 60)}, window_key="window_min"),
]}

# Findings that are not a check's: a check that raised, a tripped circuit breaker, an automated actor
# the remediation budget held back on a tier.
CHECKER = "checker"
BREAKER = "breaker"
BUDGET = "budget_held_back"


def validate_params(name: str, params: Any) -> dict[str, str]:
    """Field errors of ``params`` for check ``name`` ({"params.key": message}), empty when valid."""
    spec = CHECKS[name]
    if not isinstance(params, dict):
        return {"params": "an object of parameters"}
    errors: dict[str, str] = {}
    for key, value in params.items():
        if key not in spec.defaults:
            known = ", ".join(spec.defaults) or "none"
            errors[f"params.{key}"] = f"{name} has no parameter {key!r} (known: {known})"
            continue
        lo, hi = spec.limits[key]
        values = value.items() if isinstance(spec.defaults[key], dict) else [(None, value)]
        if isinstance(spec.defaults[key], dict) and not isinstance(value, dict):
            errors[f"params.{key}"] = "an object of numbers"
            continue
        for sub, v in values:
            where = f"params.{key}" + (f".{sub}" if sub else "")
            if isinstance(v, bool) or not isinstance(v, int | float):
                errors[where] = "a number"
            elif not lo <= v <= hi:
                errors[where] = f"{v} is out of range {lo:g}..{hi:g}"
    merged = {**spec.defaults, **params}
    if name == "temperature" and not errors and merged["warn_c"] > merged["max_c"]:
        errors["params.warn_c"] = f"warning at {merged['warn_c']} °C is above the limit {merged['max_c']} °C"
    if name == "endpoint_quota" and not errors and merged["min_headroom"] > merged["warn_headroom"]:
        errors["params.min_headroom"] = (f"failing below {merged['min_headroom']} headroom is above the warning "
                                         f"at {merged['warn_headroom']}")
    return errors
