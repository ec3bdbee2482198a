"""The simulation engine: deterministic, load-driven, drain-aware, and every fault
reproduces its failure pattern (docs/domain.md, "Failure patterns")."""

from __future__ import annotations

import statistics
from dataclasses import replace

from apps.simulator.engine import Engine
from apps.simulator.specs import ACCESS, HYBRID, Config, FaultSpec, ModuleSpec, NodeSpec
from apps.simulator.vector_faults import operator_error

T0 = 1_800_000_000.0
CALM = Config(peak_rps=100, burst_chance_per_hour=0)  # a fleet at moderate load, no campaign bursts


def fleet(hybrid_modules: int = 2, access: int = 3, hybrid: int = 4) -> list[NodeSpec]:
    nodes = [NodeSpec(hostname=f"a-{i}", tier=ACCESS, cpu_cores=8, cpu_clock_ghz=3.6) for i in range(access)]
    for i in range(hybrid):
        mods = tuple(ModuleSpec(serial=f"h-{i}-m{s}", slot=s, driver_version="2.3.1", framework_version="1.18.0",
                                module_type="Axon AX-40") for s in range(hybrid_modules))
        nodes.append(NodeSpec(hostname=f"h-{i}", tier=HYBRID, cpu_cores=16, cpu_clock_ghz=3.2, modules=mods))
    return nodes


def run(engine: Engine, nodes: list[NodeSpec], faults: list[FaultSpec], steps: int, start: float = T0,
        dt: float = 5.0) -> list:
    return [engine.step(start + k * dt, nodes, faults) for k in range(steps)]


def stage(result, tier: str, name: str) -> dict:
    return next(s for s in result.stage_samples if s["tier"] == tier and s["stage"] == name)


def test_it_is_deterministic_for_a_seed() -> None:
    a = run(Engine(seed=7), fleet(), [], 6)
    b = run(Engine(seed=7), fleet(), [], 6)
    c = run(Engine(seed=8), fleet(), [], 6)
    assert [r.node_samples for r in a] == [r.node_samples for r in b]
    assert [r.stage_samples for r in a] == [r.stage_samples for r in b]
    assert [r.node_samples for r in a] != [r.node_samples for r in c]


def test_traffic_follows_the_day_and_latency_follows_load() -> None:
    night = Engine(seed=1, config=Config(start_hour=3.5, speed=1))
    day = Engine(seed=1, config=Config(start_hour=15.5, speed=1))
    assert day.target_rps(T0) > 5 * night.target_rps(T0)
    quiet = run(Engine(seed=1, config=Config(peak_rps=50, burst_chance_per_hour=0)), fleet(), [], 8)[-1]
    busy = run(Engine(seed=1, config=Config(peak_rps=400, burst_chance_per_hour=0)), fleet(), [], 8)[-1]
    assert busy.requests_per_s > 4 * quiet.requests_per_s
    assert stage(busy, ACCESS, "planning")["p50_ms"] > stage(quiet, ACCESS, "planning")["p50_ms"]
    assert busy.node_samples["a-0"]["cpu_util"] > quiet.node_samples["a-0"]["cpu_util"]
    # The same traffic on fewer modules: busier modules, slower generation.
    cfg = Config(peak_rps=300, burst_chance_per_hour=0)
    four = run(Engine(seed=1, config=cfg), fleet(hybrid_modules=4), [], 8)[-1]
    one = run(Engine(seed=1, config=cfg), fleet(hybrid_modules=1), [], 8)[-1]
    assert stage(one, HYBRID, "generation")["p50_ms"] > stage(four, HYBRID, "generation")["p50_ms"]
    assert one.node_samples["h-0"]["modules"][0]["util"] > four.node_samples["h-0"]["modules"][0]["util"]


def test_a_drained_node_gets_no_new_work_and_its_in_flight_reaches_zero() -> None:
    engine = Engine(seed=2, config=Config(peak_rps=200, burst_chance_per_hour=0))
    nodes = fleet()
    run(engine, nodes, [], 4)
    before = engine.runtime("a-0").in_flight
    assert before > 0
    engine.set_accepting("a-0", False)  # the drain command
    seen = []
    for k in range(4, 40):
        r = engine.step(T0 + k * 5.0, nodes, [])
        seen.append(r.node_samples["a-0"]["in_flight"])
    assert all(later <= earlier for earlier, later in zip([before, *seen], seen, strict=False)), seen
    assert seen[-1] == 0
    assert r.node_samples["a-1"]["in_flight"] > 0  # the others took the work
    # A node whose state is no longer active (cordoned, draining...) is treated the same way.
    nodes = [replace(n, state="draining") if n.hostname == "a-1" else n for n in nodes]
    work = [engine.step(T0 + k * 5.0, nodes, []).node_samples["a-1"]["in_flight"] for k in range(40, 80)]
    assert work[-1] == 0 and max(work[1:]) <= work[0]


def test_a_hybrid_node_with_every_module_quarantined_gets_no_model_work() -> None:
    nodes = fleet()
    nodes = [replace(n, modules=tuple(replace(m, state="quarantined") for m in n.modules))
             if n.hostname == "h-0" else n for n in nodes]
    r = run(Engine(seed=3), nodes, [], 5)[-1]
    assert all(m["util"] == 0 for m in r.node_samples["h-0"]["modules"])
    assert r.node_samples["h-0"]["in_flight"] == 0
    assert all(m["util"] > 0 for m in r.node_samples["h-1"]["modules"])


def test_noisy_neighbour_makes_periodic_latency_spikes_on_its_node() -> None:
    fault = FaultSpec("noisy_neighbour", "a-0", {"period_s": 60, "duration_s": 15, "steal": 0.35,
                                                  "latency_factor": 6.0}, started_at=T0)
    engine = Engine(seed=4, config=CALM)
    results = run(engine, fleet(), [fault], 30)
    cpu = {int(r.time - T0): r.node_samples["a-0"]["cpu_util"] for r in results}
    # every period the job steals CPU: the first sample of a spike jumps over the one before it
    jumps = [cpu[t] - cpu[t - 5] for t in (60, 120)]
    assert min(jumps) > 0.2, jumps
    spiking = [r for r in results if (r.time - T0) % 60 < 15]
    calm = [r for r in results if (r.time - T0) % 60 >= 15][2:]
    assert statistics.mean(r.node_samples["a-0"]["cpu_util"] for r in spiking) > \
        statistics.mean(r.node_samples["a-0"]["cpu_util"] for r in calm) + 0.1
    assert min(stage(r, ACCESS, "planning")["p99_ms"] for r in spiking) > \
        2 * max(stage(r, ACCESS, "planning")["p99_ms"] for r in calm)
    assert max(r.node_samples["a-1"]["cpu_util"] for r in results) < 0.9  # only its node


def test_pcie_degraded_trains_one_module_at_reduced_width_and_slows_it() -> None:
    fault = FaultSpec("pcie_degraded", "h-0", {"slot": 1, "width_factor": 0.5}, started_at=T0)
    r = run(Engine(seed=5, config=CALM), fleet(), [fault], 6)[-1]
    slow, twin = (next(m for m in r.node_samples["h-0"]["modules"] if m["serial"] == s) for s in ("h-0-m1", "h-0-m0"))
    assert slow["link_width"] == 2 and slow["link_width_expected"] == 4
    assert twin["link_width"] == twin["link_width_expected"] == 4
    assert slow["util"] > 1.5 * twin["util"]


def test_ecc_errors_rise_then_turn_uncorrected() -> None:
    fault = FaultSpec("ecc_rising", "h-1", {"corrected_per_min": 60, "uncorrected_after_s": 60}, started_at=T0)
    results = run(Engine(seed=6), fleet(), [fault], 30)
    corrected = [r.node_samples["h-1"]["modules"][0]["ecc_corrected"] for r in results]
    assert corrected == sorted(corrected) and corrected[-1] > 100
    assert corrected[-1] - corrected[-6] > corrected[5] - corrected[0]  # the rate climbs
    assert results[5].node_samples["h-1"]["modules"][0]["ecc_uncorrected"] == 0
    assert results[-1].node_samples["h-1"]["modules"][0]["ecc_uncorrected"] > 0
    assert results[-1].node_samples["h-2"]["modules"][0]["ecc_corrected"] < 5


def test_a_crashed_node_stops_sending_and_comes_back_fresh() -> None:
    engine = Engine(seed=7)
    nodes = fleet()
    run(engine, nodes, [], 3)
    crash = FaultSpec("node_crash", "a-2", {}, started_at=T0)
    down = run(engine, nodes, [crash], 4, start=T0 + 15)
    assert all("a-2" not in r.node_samples for r in down)
    assert all("a-1" in r.node_samples for r in down)
    back = engine.step(T0 + 40, nodes, [])
    assert back.node_samples["a-2"]["in_flight"] >= 0 and "a-2" in back.node_samples


def test_runaway_parsing_pins_the_cpu_while_modules_idle() -> None:
    hybrid = FaultSpec("runaway_parsing", "h-2", {"cpu_util": 0.98}, started_at=T0)
    r = run(Engine(seed=8, config=Config(burst_chance_per_hour=0)), fleet(), [hybrid], 6)[-1]
    assert r.node_samples["h-2"]["cpu_util"] >= 0.95
    assert all(m["util"] < 0.05 for m in r.node_samples["h-2"]["modules"])
    access = FaultSpec("runaway_parsing", "a-0", {}, started_at=T0)
    base = run(Engine(seed=8, config=Config(burst_chance_per_hour=0)), fleet(), [], 6)[-1]
    hit = run(Engine(seed=8, config=Config(burst_chance_per_hour=0)), fleet(), [access], 6)[-1]
    assert hit.node_samples["a-0"]["cpu_util"] >= 0.95
    # perception and planning dominate: their tail grows many times, model stages do not
    assert stage(hit, ACCESS, "perception")["p99_ms"] > 5 * stage(base, ACCESS, "perception")["p99_ms"]
    assert stage(hit, HYBRID, "intent")["p50_ms"] < 2 * stage(base, HYBRID, "intent")["p50_ms"]


def test_a_bad_combination_corrupts_one_int8_operator_on_its_modules_only() -> None:
    fault = FaultSpec("bad_combination", None, {"operator": "Gelu", "driver": "2.4.0", "framework": "1.19.0",
                                                "error": 0.08})
    new = ModuleSpec(serial="AX-1", driver_version="2.4.0", framework_version="1.19.0")
    old = ModuleSpec(serial="AX-2", driver_version="2.3.1", framework_version="1.18.0")
    assert operator_error(new, "Gelu", [fault]) > 0.05
    assert operator_error(new, "gelu", [fault]) > 0.05
    assert operator_error(new, "MatMul", [fault]) < 1e-3
    assert operator_error(old, "Gelu", [fault]) < 1e-3
    assert operator_error(new, "Gelu", []) < 1e-3
    assert operator_error(new, "Gelu", [fault]) == operator_error(new, "Gelu", [fault])  # pure


def test_a_node_back_to_active_takes_work_again_and_held_modules_sit_out() -> None:
    engine = Engine(seed=9, config=CALM)
    nodes = fleet()
    engine.set_accepting("a-0", False)
    drained = [replace(n, state="drained") if n.hostname == "a-0" else n for n in nodes]
    run(engine, drained, [], 10)
    assert engine.runtime("a-0").in_flight == 0
    run(engine, nodes, [], 4, start=T0 + 50)  # uncordoned in the inventory
    assert engine.runtime("a-0").in_flight > 0
    engine.set_quarantined("h-0", "h-0-m0", True)
    r = run(engine, nodes, [], 3, start=T0 + 70)[-1]
    held = next(m for m in r.node_samples["h-0"]["modules"] if m["serial"] == "h-0-m0")
    assert held["util"] == 0
    assert all(m["util"] > 0 for m in r.node_samples["h-0"]["modules"] if m["serial"] != "h-0-m0")


def test_slower_modules_and_clocks_serve_slower_without_making_a_queue() -> None:
    """The tier's queue depth counts requests waiting (Little's law on the wait beyond each node's own
    idle service time), not the extra time a 20-TOPS module or a 2.4 GHz core takes to serve: at low
    utilisation a slow fleet has no queue to speak of, only slower stages."""
    def slow_fleet() -> list[NodeSpec]:
        nodes = [NodeSpec(hostname=f"a-{i}", tier=ACCESS, cpu_cores=16, cpu_clock_ghz=2.4) for i in range(8)]
        for i in range(8):
            mods = tuple(ModuleSpec(serial=f"h-{i}-m{s}", slot=s, tops=20.0) for s in range(4))
            nodes.append(NodeSpec(hostname=f"h-{i}", tier=HYBRID, cpu_cores=16, cpu_clock_ghz=3.2, modules=mods))
        return nodes

    cfg = Config(peak_rps=100, burst_chance_per_hour=0, speed=1)
    slow = run(Engine(seed=1, config=cfg), slow_fleet(), [], 12)[-1]
    fast = run(Engine(seed=1, config=cfg), fleet(hybrid_modules=4, access=8, hybrid=8), [], 12)[-1]
    util = statistics.fmean(m["util"] for s in slow.node_samples.values() for m in s["modules"])
    cpu = statistics.fmean(slow.node_samples[f"a-{i}"]["cpu_util"] for i in range(8))
    assert util < 0.3 and cpu < 0.5, (util, cpu)
    assert stage(slow, HYBRID, "generation")["p50_ms"] > 1.5 * stage(fast, HYBRID, "generation")["p50_ms"]
    assert stage(slow, ACCESS, "planning")["p50_ms"] > 1.1 * stage(fast, ACCESS, "planning")["p50_ms"]
    queue = {t["tier"]: t["queue_depth"] for t in slow.tier_samples}
    assert queue[HYBRID] <= 0.1 * 32, queue  # 32 modules, each busy under a third of the time
    assert queue[ACCESS] <= 0.1 * 8 * 16, queue


def test_it_breaks_the_model_stages_down_per_hybrid_node_as_a_gateway_does() -> None:
    """The per-node breakdown a rollout's cohort gate compares: each serving hybrid node's own calls
    and latency per model stage, adding up to the tier's; a node with a module at half width is slower."""
    fault = FaultSpec("pcie_degraded", "h-0", {"slot": 0, "width_factor": 0.5}, started_at=T0)
    r = run(Engine(seed=9, config=CALM), fleet(), [fault], 6)[-1]
    per_node = [s for s in r.stage_samples if s.get("node")]
    assert {s["node"] for s in per_node} == {f"h-{i}" for i in range(4)}
    assert all(s["tier"] == HYBRID and s["stage"] in ("intent", "generation") and s["errors"] == 0 for s in per_node)
    for name in ("intent", "generation"):
        tier = next(s for s in r.stage_samples if s["stage"] == name and s["tier"] == HYBRID and not s.get("node"))
        assert abs(sum(s["count"] for s in per_node if s["stage"] == name) - tier["count"]) <= 4
    gen = {s["node"]: s["p50_ms"] for s in per_node if s["stage"] == "generation"}
    assert gen["h-0"] > 1.2 * max(gen[h] for h in ("h-1", "h-2", "h-3")), gen
