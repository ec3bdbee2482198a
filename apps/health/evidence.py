"""A finding's evidence and a check's parameters as an operator reads them: each key with a label and
its unit (``link_width`` → "PCIe link width ×2", ``temp_c`` → "Temperature 86 °C", fractions as
percentages), figures printed by the rule of the pages' ``|num`` filter. A key no check declares gets a
label made from its name and a unit from its suffix, so new evidence is readable before it is declared.

Which evidence keys make a finding's cause (``CAUSE_KEYS``) also lives here: findings of one check whose
cause keys hold the same values are one card on /health/ (seven modules one driver off the same pin)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apps.common.templatetags.numbers import number_text


@dataclass(frozen=True)
class Field:
    label: str
    unit: str = ""
    scale: float = 1.0  # 100 for a fraction shown as a percentage
    prefix: str = ""  # "×" for a link width


def pct(label: str) -> Field:
    return Field(label, "%", 100)


# Keys whose meaning is the same in every check's evidence.
COMMON: dict[str, Field] = {
    "window_min": Field("Window", "min"),
    "over_min": Field("Over", "min"),
    "age_s": Field("Telemetry age", "s"),
    "endpoint": Field("Endpoint"),
    "requests": Field("Requests"),
}

EVIDENCE: dict[str, dict[str, Field]] = {
    "heartbeat": {"last_report_s": Field("Last report", "s ago"), "timeout_s": Field("Timeout", "s"),
                  "state": Field("Node state")},
    "cpu_bound": {"cpu_util": pct("CPU"), "cpu_min": pct("Fails from CPU"), "module_util": pct("Module utilisation"),
                  "module_util_max": pct("While modules at most"), "tier_median_cpu": pct("Tier's median node CPU"),
                  "tier_median_max": pct("While the tier's median at most")},
    "noisy_neighbour": {"spike_minutes": Field("Spike minutes"), "amplitude": pct("Spike above the tier's median"),
                        "min_spikes": Field("Fails from spike minutes"),
                        "peaks_vs_tier_median": pct("CPU peaks (minute, node, tier's median)")},
    "drain_deadline": {"drain": Field("Drain", prefix="#"), "owner": Field("Owner"), "by": Field("By"),
                       "reason": Field("Reason"), "in_flight": Field("Requests in flight"),
                       "deadline": Field("Deadline"), "late_s": Field("Late by", "s")},
    "ecc": {"corrected_per_min": Field("Corrected ECC errors", "/min"),
            "corrected_limit_per_min": Field("Fails from", "/min"), "new_uncorrected": Field("New uncorrected errors"),
            "ecc_corrected": Field("Corrected errors (counter)"),
            "ecc_uncorrected": Field("Uncorrected errors (counter)")},
    "link_width": {"link_width": Field("PCIe link width", prefix="×"), "expected": Field("Expected width", prefix="×")},
    "temperature": {"temp_c": Field("Temperature", "°C"), "warn_c": Field("Warning at", "°C"),
                    "max_c": Field("Throttles at", "°C")},
    "power": {"power_w": Field("Power draw", "W"), "rated_w": Field("Rated", "W"), "limit_w": Field("Limit", "W")},
    "module_errors": {"new_errors": Field("New errors"), "max_new": Field("New errors allowed"),
                      "errors": Field("Errors (counter)")},
    "agent_contract": {"agent_version": Field("Agent version"), "agent_contract": Field("Agent's newest contract"),
                       "server_contract": Field("Server's contract")},
    "version_drift": {"driver": Field("Driver"), "framework": Field("Framework"),
                      "pinned_driver": Field("Pinned driver"), "pinned_framework": Field("Pinned framework")},
    "stage_latency": {"p95_ms": Field("Stage p95", "ms"), "over_target": Field("Over target (p95, target)", "ms")},
    "low_util_queue": {"module_util": pct("Module utilisation"), "util_max": pct("Fails below"),
                       "queue_first": Field("Queue at the window's start"), "queue_last": Field("Queue now"),
                       "growth": Field("Growth that fails", prefix="×"), "min_queue": Field("Queue that fails from")},
    "endpoint_latency": {"p95_ms": Field("p95", "ms"), "slo_ms": Field("SLO", "ms"),
                         "p95_per_minute": Field("p95 per minute", "ms")},
    "endpoint_errors": {"error_rate": pct("Failed requests"), "max_error_rate": pct("Fails from"),
                        "errors": Field("Failed requests")},
    "endpoint_quota": {"requests_per_min": Field("Requests", "/min"),
                       "quota_requests_per_min": Field("Requests quota", "/min"),
                       "tokens_per_min": Field("Tokens", "/min"), "quota_tokens_per_min": Field("Tokens quota", "/min"),
                       "used": pct("Quota used"), "headroom": pct("Headroom"), "binding": Field("Binding quota"),
                       "warn_headroom": pct("Warns below headroom"), "min_headroom": pct("Fails below headroom"),
                       "requests_per_minute": Field("Requests per minute", "/min")},
    "checker": {"check": Field("Check"), "count": Field("Subjects it raised on"), "errors": Field("Errors")},
    "breaker": {"check": Field("Check"), "failing_nodes": Field("Failing nodes"),
                "serving_nodes": Field("Serving nodes"), "share": pct("Share failing"), "breaker": pct("Trips above"),
                "recent_change": Field("Most recent change")},
    "stuck": {"object": Field("Object"), "state": Field("State"), "since": Field("Since"),
              "stuck_s": Field("In this state for", "s"), "expected_s": Field("Expected", "s"),
              "waits_for": Field("Waits for"), "rollout": Field("Rollout", prefix="#"),
              "rollout_state": Field("Rollout's state"), "run": Field("Vector run", prefix="#"),
              "phase": Field("Phase"), "command": Field("Command", prefix="#"), "kind": Field("Command kind")},
    "budget_held_back": {"actor": Field("Held back"), "wanted": Field("Would have"), "limit": Field("Limit reached"),
                         "kind": Field("Counted in"), "asked": Field("Asked for"), "granted": Field("Granted"),
                         "held": Field("Held by automation on the tier"), "held_by": Field("On the tier, by actor"),
                         "serving": Field("Serving on the tier"), "max_unavailable": Field("At most at once (tier)"),
                         "started_last_hour": Field("Started on the tier in the last hour"),
                         "started_by": Field("Started, by actor"), "per_hour": Field("At most per hour"),
                         "fleet_held": Field("Held by automation in the fleet"),
                         "fleet_held_by": Field("In the fleet, by actor"),
                         "fleet_serving": Field("Serving in the fleet"),
                         "fleet_max_unavailable": Field("At most at once (fleet)"), "since": Field("Held back since"),
                         "times": Field("Times held back"), "also_held_back": Field("Also held back")},
    "vector_regression": {"run": Field("Regression run", prefix="#"), "combination": Field("Combination", prefix="#"),
                          "cases": Field("Failing cases")},
}

# A check's parameters (the checks section of /health/): what each one sets.
PARAMS: dict[str, Field] = {
    "timeout_s": Field("Silent for", "s"), "cpu_min": pct("CPU from"), "module_util_max": pct("Modules at most"),
    "tier_median_max": pct("Tier's median at most"), "amplitude": pct("Spike above the tier's median"),
    "min_spikes": Field("Spike minutes"), "corrected_per_min": Field("Corrected ECC errors from", "/min"),
    "warn_c": Field("Warns at", "°C"), "max_c": Field("Fails at", "°C"),
    "max_ratio": Field("Power above rating", prefix="×"),
    "max_new": Field("New errors allowed"), "p95_ms": Field("p95 targets", "ms"), "util_max": pct("Utilisation below"),
    "growth": Field("Queue growth", prefix="×"), "min_queue": Field("Queue from"),
    "per_module": Field("Queue per serving module"), "min_requests": Field("Judged from requests"),
    "max_error_rate": pct("Failed requests from"), "warn_headroom": pct("Warns below headroom"),
    "min_headroom": pct("Fails below headroom"), "window_min": Field("Window", "min"),
}

# Evidence keys whose values make a finding's cause; findings of a check not named here share one cause.
CAUSE_KEYS: dict[str, tuple[str, ...]] = {
    "agent_contract": ("agent_version", "agent_contract"),
    "version_drift": ("driver", "framework", "pinned_driver", "pinned_framework"),
    "link_width": ("link_width", "expected"),
    "checker": ("check",),
    "breaker": ("check",),
    "vector_regression": ("combination",),
    "budget_held_back": ("actor", "limit"),
}

# Units read from a key's suffix when no check declares the key.
SUFFIX_UNITS = (("_per_min", "/min"), ("_ms", "ms"), ("_s", "s"), ("_min", "min"), ("_c", "°C"), ("_w", "W"))


def guessed(key: str) -> Field:
    """A readable label and unit for a key no check declares: ``queue_len_ms`` → "Queue len", ms."""
    for suffix, unit in SUFFIX_UNITS:
        if key.endswith(suffix) and len(key) > len(suffix):
            return Field(key[: -len(suffix)].replace("_", " ").capitalize(), unit)
    return Field(key.replace("_", " ").capitalize())


def field(check_name: str, key: str) -> Field:
    return EVIDENCE.get(check_name, {}).get(key) or COMMON.get(key) or guessed(key)


def value_text(value: Any, f: Field) -> str:
    """One value as text: a figure with its unit (by the pages' rule), a list or an object item by item."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        figure = number_text(value * f.scale if f.scale != 1 else value, f.unit)
        return f"{f.prefix}{figure}"
    if isinstance(value, dict):
        return ", ".join(f"{k.replace('_', ' ')} {value_text(v, f)}" for k, v in value.items()) or "–"
    if isinstance(value, list | tuple):
        if value and all(isinstance(v, list | tuple) for v in value):
            return "; ".join(" / ".join(value_text(x, f) for x in v) for v in value)
        if value and all(isinstance(v, dict) for v in value):
            return "; ".join(value_text(v, f) for v in value)
        return ", ".join(value_text(v, f) for v in value) or "–"
    return str(value)


def evidence_rows(check_name: str, evidence: dict[str, Any] | None) -> list[dict[str, str]]:
    """The evidence as labelled values: the check's declared keys in their order (the measured figure
    first), then the rest as stored."""
    ev = evidence or {}
    declared = [k for k in EVIDENCE.get(check_name, {}) if k in ev]
    keys = declared + [k for k in ev if k not in declared]
    return [{"key": k, "label": (f := field(check_name, k)).label, "text": value_text(ev[k], f)} for k in keys]


def param_rows(params: dict[str, Any]) -> list[dict[str, str]]:
    """A check's parameters as labelled values."""
    return [{"key": k, "label": (f := PARAMS.get(k) or guessed(k)).label, "text": value_text(v, f)}
            for k, v in params.items()]


def cause_of(check_name: str, evidence: dict[str, Any] | None) -> tuple[str, ...]:
    """The values of the evidence that make the finding's cause (empty: one cause for the check)."""
    ev = evidence or {}
    return tuple(str(ev.get(k)) for k in CAUSE_KEYS.get(check_name, ()))
