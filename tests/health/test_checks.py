"""The checks as pure functions: the numbers they judge, unknown (never pass) without fresh
telemetry, the noisy neighbour judged against the tier's median node."""

from __future__ import annotations

import datetime as dt

from apps.health import checks, hysteresis, inputs
from apps.health.checks import CHECKS
from apps.health.inputs import Context, ModuleView, NodeView

NOW = dt.datetime(2026, 11, 30, 12, 0, 30, tzinfo=dt.UTC)


def _node(**kw: object) -> NodeView:
    base: dict[str, object] = dict(id=1, hostname="n-1", tier_id=2, state="active", age_s=2.0, cpu=0.3, in_flight=1,
                                   cpu_minutes=[], module_utils=[0.5], modules=1)
    base.update(kw)
    return NodeView(**base)  # type: ignore[arg-type]


def _module(latest: dict[str, object], baseline: dict[str, object] | None = None, **kw: object) -> ModuleView:
    base: dict[str, object] = dict(id=5, serial="m-5", node_id=1, tier_id=2, node_state="active", state="healthy",
                                   capabilities=frozenset(checks.CHECKS), rated_power_w=10.0, lanes=4, driver="2",
                                   framework="1", pinned=("2", "1"), age_s=2.0, latest=latest, baseline=baseline)
    base.update(kw)
    return ModuleView(**base)  # type: ignore[arg-type]


def _p(name: str) -> dict[str, object]:
    return dict(CHECKS[name].defaults)


CTX = Context(now=NOW, stale_s=30)


def test_it_fails_the_heartbeat_of_a_silent_node_and_passes_a_reporting_one() -> None:
    assert checks.heartbeat(_node(age_s=45.0), _p("heartbeat"), CTX).status == "fail"  # type: ignore[union-attr]
    assert checks.heartbeat(_node(age_s=None), _p("heartbeat"), CTX).status == "fail"  # type: ignore[union-attr]
    assert checks.heartbeat(_node(age_s=3.0), _p("heartbeat"), CTX).status == "pass"  # type: ignore[union-attr]
    assert checks.heartbeat(_node(state="maintenance"), _p("heartbeat"), CTX) is None


def test_it_says_unknown_never_pass_without_fresh_telemetry() -> None:
    for name in ("cpu_bound", "noisy_neighbour"):
        out = CHECKS[name].fn(_node(age_s=120.0), _p(name), CTX)
        assert out is not None and out.status == "unknown" and out.stale, name
    for name in ("ecc", "link_width", "temperature", "power", "module_errors"):
        out = CHECKS[name].fn(_module({"link_width": 4}, age_s=90.0), _p(name), CTX)
        assert out is not None and out.status == "unknown" and out.stale, name


def test_it_judges_ecc_by_the_corrected_rate_and_any_new_uncorrected_error() -> None:
    first = NOW.replace(second=0) - dt.timedelta(minutes=2)
    base = {"first_minute": first, "ecc_corrected": 10, "ecc_uncorrected": 0, "errors": 0}
    calm = checks.ecc(_module({"ecc_corrected": 11, "ecc_uncorrected": 0}, base), _p("ecc"), CTX)
    rising = checks.ecc(_module({"ecc_corrected": 90, "ecc_uncorrected": 0}, base), _p("ecc"), CTX)
    broken = checks.ecc(_module({"ecc_corrected": 12, "ecc_uncorrected": 1}, base), _p("ecc"), CTX)
    assert calm is not None and calm.status == "pass"
    assert rising is not None and rising.status == "fail" and rising.evidence["corrected_per_min"] == 32.0
    assert broken is not None and broken.status == "fail" and broken.severity == "critical"
    assert broken.evidence["new_uncorrected"] == 1
    no_rollups = checks.ecc(_module({"ecc_corrected": 1, "ecc_uncorrected": 0}, None), _p("ecc"), CTX)
    assert no_rollups is not None and no_rollups.status == "unknown" and not no_rollups.stale


def test_it_compares_the_link_width_with_the_module_types_lanes() -> None:
    out = checks.link_width(_module({"link_width": 2, "link_width_expected": 2}), {}, CTX)
    assert out is not None and out.status == "fail" and out.evidence == {"link_width": 2, "expected": 4}
    ok = checks.link_width(_module({"link_width": 4}), {}, CTX)
    assert ok is not None and ok.status == "pass"


def test_it_blames_a_cpu_bound_node_only_when_its_modules_idle() -> None:
    busy = checks.cpu_bound(_node(cpu=0.97, module_utils=[0.02, 0.01], modules=2), _p("cpu_bound"), CTX)
    working = checks.cpu_bound(_node(cpu=0.97, module_utils=[0.8]), _p("cpu_bound"), CTX)
    assert busy is not None and busy.status == "fail" and busy.evidence["module_util"] == 0.015
    assert working is not None and working.status == "pass"


def test_it_finds_a_noisy_neighbour_against_the_tiers_median_node_not_a_fleet_wide_surge() -> None:
    m = [NOW.replace(second=0) - dt.timedelta(minutes=i) for i in (4, 3, 2, 1, 0)]
    spiky = [(m[0], 0.35, 0.70), (m[1], 0.30, 0.34), (m[2], 0.36, 0.71), (m[3], 0.30, 0.33), (m[4], 0.30, 0.32)]
    ctx = Context(now=NOW, stale_s=30, tier_median_cpu={2: 0.3},
                  tier_median_cpu_max={2: {x: 0.34 for x in m}}, tier_median_cpu_mean={2: {x: 0.3 for x in m}})
    out = checks.noisy_neighbour(_node(cpu_minutes=spiky), _p("noisy_neighbour"), ctx)
    assert out is not None and out.status == "fail" and len(out.evidence["spike_minutes"]) == 2
    # A step to a sustained high load (runaway parsing starting) is not a spike, now or in its minute.
    step = [(m[0], 0.30, 0.33), (m[1], 0.30, 0.32), (m[2], 0.31, 0.34), (m[3], 0.34, 0.98), (m[4], 0.98, 0.98)]
    stepped = checks.noisy_neighbour(_node(cpu=0.98, cpu_minutes=step), _p("noisy_neighbour"), ctx)
    assert stepped is not None and stepped.status == "pass", stepped
    late = checks.noisy_neighbour(_node(cpu=0.98, cpu_minutes=step[:4]), _p("noisy_neighbour"), ctx)
    assert late is not None and late.status == "pass", late
    # Every node spikes together (a campaign burst): the median node shows it too, nobody is blamed.
    surge = Context(now=NOW, stale_s=30, tier_median_cpu={2: 0.3},
                    tier_median_cpu_max={2: {x: top for x, _, top in spiky}})
    same = checks.noisy_neighbour(_node(cpu_minutes=spiky), _p("noisy_neighbour"), surge)
    assert same is not None and same.status == "pass"


def test_it_validates_parameters_naming_the_field() -> None:
    assert checks.validate_params("ecc", {"window_min": -1}) == {"params.window_min": "-1 is out of range 1..60"}
    assert "params.nope" in checks.validate_params("ecc", {"nope": 1})
    assert checks.validate_params("stage_latency", {"p95_ms": {"tool_call": 0}}) == {
        "params.p95_ms.tool_call": "0 is out of range 1..600000"}
    assert checks.validate_params("temperature", {"warn_c": 90}) == {
        "params.warn_c": "warning at 90 °C is above the limit 85 °C"}
    assert checks.validate_params("ecc", {"window_min": 5}) == {}


def test_it_raises_on_n_of_m_and_clears_after_k_passes_in_a_row() -> None:
    mem = hysteresis.Memory()
    for status in ("fail", "pass", "fail"):
        mem = hysteresis.remember(mem, status, m=5)
    assert not hysteresis.raising(mem, n=3)
    mem = hysteresis.remember(mem, "fail", m=5)
    assert hysteresis.raising(mem, n=3) and mem.history == "fpff"
    for _ in range(4):
        mem = hysteresis.remember(mem, "pass", m=5)
    mem = hysteresis.remember(mem, "unknown", m=5)  # unknown breaks the run of passes
    assert not hysteresis.clearing(mem, k=5)
    for _ in range(5):
        mem = hysteresis.remember(mem, "pass", m=5)
    assert hysteresis.clearing(mem, k=5) and not hysteresis.raising(mem, n=3)
    for _ in range(3):
        mem = hysteresis.remember(mem, "pass", m=5, pass_cap=5)
    assert mem == hysteresis.Memory("ppppp", 5, 0)  # steady: nothing changes any more


def test_it_blames_low_utilisation_with_a_growing_queue_and_not_a_busy_or_steady_tier() -> None:
    def tier(util: float, queue: list[float], modules: int = 8) -> inputs.TierView:
        minutes = [(NOW.replace(second=0) - dt.timedelta(minutes=len(queue) - 1 - k), q) for k, q in enumerate(queue)]
        return inputs.TierView(id=2, name="hybrid", kind="hybrid_inference", modules=modules, module_util=util,
                               stage_p95={}, queue_minutes=minutes)

    p = _p("low_util_queue")
    stuck = checks.low_util_queue(tier(0.12, [8.0, 14.0, 22.0]), p, CTX)
    busy = checks.low_util_queue(tier(0.75, [8.0, 14.0, 22.0]), p, CTX)
    steady = checks.low_util_queue(tier(0.12, [20.0, 21.0, 22.0]), p, CTX)
    small = checks.low_util_queue(tier(0.12, [2.0, 4.0, 8.0]), p, CTX)
    assert stuck is not None and stuck.status == "fail" and stuck.evidence["queue_last"] == 22.0
    assert [o.status for o in (busy, steady, small) if o is not None] == ["pass", "pass", "pass"]
    # A queue is judged against the modules serving it: a 60-module tier ramping up to 28 % has a
    # dozen requests waiting in all (a fraction of one per module), which is load, not a stall.
    ramp = checks.low_util_queue(tier(0.28, [6.0, 8.0, 12.0], modules=60), p, CTX)
    stalled = checks.low_util_queue(tier(0.1, [30.0, 50.0, 75.0], modules=60), p, CTX)
    assert ramp is not None and ramp.status == "pass" and ramp.evidence["min_queue"] == 60
    assert stalled is not None and stalled.status == "fail"
    assert checks.low_util_queue(tier(0.12, [22.0]), p, CTX).status == "unknown"  # type: ignore[union-attr]
    assert checks.low_util_queue(inputs.TierView(id=1, name="access", kind="access_logic", modules=0,
                                                 module_util=None, stage_p95={}, queue_minutes=[]), p, CTX) is None
