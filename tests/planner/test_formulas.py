"""The sizing formulas, checked against the worked examples of docs/domain.md and at the ceiling edges."""

import math
from dataclasses import FrozenInstanceError
from fractions import Fraction

import pytest

from apps.common.templatetags.numbers import number_text
from apps.planner.formulas import (
    AgentInputs,
    ArrayInputs,
    CostInputs,
    compare_cost,
    fmt,
    fmt_ceil,
    reference_configuration,
    size_agents,
    size_array,
    sweep_users,
)

WORKED_ARRAY = ArrayInputs(concurrent_users=1000, request_interval_s=2, input_tokens=500, output_tokens=100)
WORKED_AGENTS = AgentInputs(agents=10, inferences_per_s_per_agent=2, tokens_per_inference=500,
                            tokens_per_s_per_accelerator=2000)


def test_it_reproduces_the_array_worked_example() -> None:
    # 1,000 users, one request every 2 s, 500 in / 100 out; two 8-core 3 GHz CPUs.
    plan = size_array(ArrayInputs(concurrent_users=1000, request_interval_s=2, input_tokens=500,
                                  output_tokens=100, cpu_count=2))
    assert plan.requests_per_s == 500
    assert plan.input_tokens_per_s == 250_000
    assert plan.output_tokens_per_s == 50_000
    assert plan.compute_tflops == 300
    assert plan.modules_needed == 10
    assert plan.nodes_needed == 5
    assert plan.cpu_instructions_per_s == 2.5e8
    assert plan.cpu_capacity_per_s == 4e9
    assert plan.cpu_headroom == 0.9375
    assert plan.cpu_headroom > 0.6  # "far more than 60% headroom"


def test_it_explains_each_array_output_with_the_numbers_filled_in() -> None:
    plan = size_array(ArrayInputs(concurrent_users=1000, request_interval_s=2, input_tokens=500,
                                  output_tokens=100, cpu_count=2))
    e = plan.explanations
    assert e["requests_per_s"] == "requests/s = 1,000 users ÷ 2 s between requests = 500"
    assert e["input_tokens_per_s"] == "input tokens/s = 500 req/s × 500 input tokens = 250,000"
    assert e["compute_tflops"] == ("model compute = 50,000 output tok/s × 6 GFLOPs per token = 300,000 GFLOPs/s "
                                   "= 300 TFLOPs/s")
    assert e["modules_needed"] == "modules = ceil(300 TFLOPs/s ÷ 30 TOPS per module) = ceil(10) = 10"
    assert e["nodes_needed"] == "nodes = ceil(10 modules ÷ 2 modules per node) = ceil(5) = 5"
    assert e["cpu_instructions_per_s"] == "CPU load = 500 req/s × 500,000 instructions per request = 2.5e8/s"
    assert e["cpu_capacity_per_s"] == (
        "CPU capacity = 2 CPU × 8 cores × 1e9 instructions/s per core × 0.25 usable = 4e9/s")
    assert e["cpu_headroom"] == "CPU headroom = 1 − 2.5e8 ÷ 4e9 = 0.938"
    assert set(e) == {"requests_per_s", "input_tokens_per_s", "output_tokens_per_s", "compute_tflops",
                      "modules_needed", "nodes_needed", "cpu_instructions_per_s", "cpu_capacity_per_s",
                      "cpu_headroom"}


def test_it_sizes_one_8_core_cpu_at_2e9_usable() -> None:
    # docs/domain.md: "an 8-core 3 GHz CPU ≈ 2e9/s" usable: the defaults are one such CPU.
    plan = size_array(WORKED_ARRAY)
    assert plan.cpu_capacity_per_s == 2e9
    assert plan.cpu_headroom == 0.875


def test_it_reports_negative_headroom_when_the_cpu_is_overloaded() -> None:
    plan = size_array(ArrayInputs(concurrent_users=100_000, request_interval_s=2, input_tokens=500,
                                  output_tokens=100))
    # 50,000 req/s × 500k = 2.5e10/s against 2e9/s usable.
    assert plan.cpu_instructions_per_s == 2.5e10
    assert plan.cpu_headroom == -11.5
    assert plan.explanations["cpu_headroom"].endswith("(overloaded)")


def test_it_rounds_exact_quotients_without_float_error() -> None:
    # In floats, 1000 × 7 × 0.3 / 1000 / 0.3 is 7.000000000000001, whose ceiling is 8.
    naive = 1000 / 1 * 7 * 0.3 / 1000 / 0.3
    assert math.ceil(naive) == 8
    plan = size_array(ArrayInputs(concurrent_users=1000, request_interval_s=1, input_tokens=0, output_tokens=7,
                                  gflops_per_token=0.3, module_tops=0.3))
    assert plan.compute_tflops == 2.1
    assert plan.modules_needed == 7


def test_it_rounds_up_just_past_a_whole_module_and_node() -> None:
    at = size_array(ArrayInputs(concurrent_users=1000, request_interval_s=2, input_tokens=0, output_tokens=100))
    assert (at.modules_needed, at.nodes_needed) == (10, 5)
    # One more user: 500.5 req/s → 300.3 TFLOPs → 10.01 modules → 11 modules → 6 nodes.
    past = size_array(ArrayInputs(concurrent_users=1001, request_interval_s=2, input_tokens=0, output_tokens=100))
    assert past.compute_tflops == pytest.approx(300.3)
    assert (past.modules_needed, past.nodes_needed) == (11, 6)
    # An odd module count still needs a whole node for the last one: 3 modules, 2 per node → 2 nodes.
    odd = size_array(ArrayInputs(concurrent_users=300, request_interval_s=2, input_tokens=0, output_tokens=100))
    assert (odd.modules_needed, odd.nodes_needed) == (3, 2)


def test_it_divides_by_non_terminating_intervals_exactly() -> None:
    # 1000 users every 3 s = 333.33… req/s; × 300 tokens × 6 GFLOPs = 600 TFLOPs → exactly 20 modules.
    plan = size_array(ArrayInputs(concurrent_users=1000, request_interval_s=3, input_tokens=0, output_tokens=300))
    assert plan.compute_tflops == 600
    assert plan.modules_needed == 20


def test_it_reproduces_the_agent_worked_example() -> None:
    plan = size_agents(WORKED_AGENTS)
    assert plan.inference_tokens_per_s == 10_000
    assert plan.accelerators_needed == 5
    assert plan.accelerators_needed_batched == 5  # no batching gain given
    assert plan.cpu_cores_needed == 15  # 10 agents × 1 core × 1.5
    assert plan.explanations["inference_tokens_per_s"] == (
        "inference tokens/s = 10 agents × 2 inferences/s × 500 tokens per inference = 10,000")
    assert plan.explanations["accelerators_needed"] == (
        "accelerators = ceil(10,000 tok/s ÷ 2,000 tok/s per accelerator) = ceil(5) = 5")


@pytest.mark.parametrize("gain, cards", [(1.7, 3), (5 / 3, 3), (2.5, 2), (1.6, 4), (1.0, 5)])
def test_it_brings_batched_cards_to_about_3(gain: float, cards: int) -> None:
    # "batching brings that to about 3": any gain in [5/3, 2.5) gives 3 cards; the docs use 1.7.
    plan = size_agents(AgentInputs(agents=10, inferences_per_s_per_agent=2, tokens_per_inference=500,
                                   tokens_per_s_per_accelerator=2000, batching_gain=gain))
    assert plan.accelerators_needed == 5
    assert plan.accelerators_needed_batched == cards


def test_it_rounds_agent_cpu_cores_up() -> None:
    plan = size_agents(AgentInputs(agents=3, inferences_per_s_per_agent=1, tokens_per_inference=100,
                                   tokens_per_s_per_accelerator=2000, cores_per_agent=0.5, safety_factor=1.5))
    assert plan.cpu_cores_needed == 3  # 3 × 0.5 × 1.5 = 2.25 → 3
    assert plan.explanations["cpu_cores_needed"] == (
        "CPU cores = ceil(3 agents × 0.5 cores per agent × 1.5 safety factor) = ceil(2.25) = 3")


@pytest.mark.parametrize("agents, row, exact", [
    (1, "1–3", True), (3, "1–3", True),
    (4, "5–10", False), (5, "5–10", True), (10, "5–10", True),
    (11, "20–50", False), (19, "20–50", False), (20, "20–50", True), (50, "20–50", True),
    (51, "100+", False), (99, "100+", False), (100, "100+", True), (5000, "100+", True),
])
def test_it_maps_agent_counts_to_reference_rows_next_row_up(agents: int, row: str, exact: bool) -> None:
    match = reference_configuration(agents)
    assert match.row.agents == row
    assert match.exact is exact


def test_it_gives_the_reference_row_contents() -> None:
    assert reference_configuration(2).row.summary == "8 high-clock cores, one mid-range card, 32 GB"
    assert reference_configuration(10).row.summary == "16 cores, one high-end card, 64 GB"
    assert reference_configuration(30).row.summary == "dual 16-core, several cards, 128 GB+"
    assert reference_configuration(500).row.summary == "a scheduled heterogeneous cluster"
    assert size_agents(WORKED_AGENTS).explanations["reference_configuration"] == (
        "10 agents fall in the 5–10 row: 16 cores, one high-end card, 64 GB")
    assert reference_configuration(4).explanation.startswith("4 agents fall between rows; sized up to the 5–10 row")


def test_it_compares_costs_by_the_rule_of_thumb() -> None:
    result = compare_cost(CostInputs(gpu_server_price=200_000, cpu_node_price=12_000, module_price=4_000,
                                     cpu_nodes=5, modules=10, concurrent_users=1000))
    assert result.rule_of_thumb_array_cost == 200_000
    assert result.rule_of_thumb_ratio == 1
    assert result.plan_array_cost == 100_000
    assert result.gpu_servers_equivalent == 1
    assert result.plan_saving == 100_000
    more = compare_cost(CostInputs(gpu_server_price=150_000, cpu_node_price=12_000, module_price=4_000,
                                   cpu_nodes=11, modules=22, concurrent_users=1001))
    assert more.gpu_servers_equivalent == 2
    assert more.rule_of_thumb_ratio == pytest.approx(200_000 / 150_000)


def test_it_sweeps_users_through_the_given_point() -> None:
    points = sweep_users(WORKED_ARRAY)
    assert points[0] == (0, 0, 1.0)
    assert (1000, 10, 0.875) in points
    assert points[-1][0] == 2000
    assert [p[1] for p in points] == sorted(p[1] for p in points)


def test_it_keeps_results_immutable() -> None:
    plan = size_array(WORKED_ARRAY)
    with pytest.raises(FrozenInstanceError):
        plan.modules_needed = 1  # type: ignore[misc]


@pytest.mark.parametrize("value, text", [(250_000, "250,000"), (2.5e8, "2.5e8"), (4e9, "4e9"), (0.9375, "0.938"),
                                         (2.94117647, "2.94"), (-11.5, "-11.5"), (1216.2339, "1,216"),
                                         (37.5172, "37.5"), (433.5432, "434")])
def test_it_writes_numbers_as_every_page_prints_them(value: float, text: str) -> None:
    # The |num rule (no decimals from 100, one from 10, two from 1, three significant digits below),
    # scientific notation from 1e7 as the page's script writes it.
    assert fmt(value) == text
    if "e" not in text:
        assert fmt(value) == number_text(value)


@pytest.mark.parametrize("value, text", [(Fraction(231, 25), "9.24"), (Fraction(10), "10"),
                                         (Fraction(100_001, 10_000), "10.0001"), (Fraction(1096, 100), "10.96"),
                                         (Fraction(100_004, 1_000), "100.004")])
def test_a_ceiling_shows_a_fraction_never_as_a_whole_number(value: Fraction, text: str) -> None:
    assert fmt_ceil(value) == text
