"""Planner API: viewers compute, bad input gets 400 with a message per field, never a 500."""

from typing import Any

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

ARRAY = "/api/v1/planner/array/"
AGENTS = "/api/v1/planner/agents/"
COST = "/api/v1/planner/cost/"
CHART = "/api/v1/planner/array/chart/"
WORKED_ARRAY = {"concurrent_users": 1000, "request_interval_s": 2, "input_tokens": 500, "output_tokens": 100}
WORKED_AGENTS = {"agents": 10, "inferences_per_s_per_agent": 2, "tokens_per_inference": 500,
                 "tokens_per_s_per_accelerator": 2000}


def _post(client: APIClient, url: str, body: Any) -> Any:
    return client.post(url, body, format="json")


def test_it_sizes_the_array_worked_example_for_a_viewer(viewer_api: APIClient) -> None:
    r = _post(viewer_api, ARRAY, {**WORKED_ARRAY, "cpu_count": 2})
    assert r.status_code == 200, r.json()
    body = r.json()
    assert {k: body[k] for k in ("requests_per_s", "input_tokens_per_s", "output_tokens_per_s", "compute_tflops",
                                 "modules_needed", "nodes_needed", "cpu_instructions_per_s", "cpu_capacity_per_s",
                                 "cpu_headroom")} == {
        "requests_per_s": 500, "input_tokens_per_s": 250_000, "output_tokens_per_s": 50_000, "compute_tflops": 300,
        "modules_needed": 10, "nodes_needed": 5, "cpu_instructions_per_s": 2.5e8, "cpu_capacity_per_s": 4e9,
        "cpu_headroom": 0.9375,
    }
    assert body["explanations"]["modules_needed"] == "modules = ceil(300 TFLOPs/s ÷ 30 TOPS per module) = ceil(10) = 10"
    # Defaults are filled in and echoed.
    assert body["inputs"]["gflops_per_token"] == 6
    assert body["inputs"]["usable_fraction"] == 0.25
    assert body["inputs"]["cpu_count"] == 2


def test_it_sizes_the_agent_worked_example(viewer_api: APIClient) -> None:
    r = _post(viewer_api, AGENTS, {**WORKED_AGENTS, "batching_gain": 1.7})
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["inference_tokens_per_s"] == 10_000
    assert body["accelerators_needed"] == 5
    assert body["accelerators_needed_batched"] == 3
    assert body["cpu_cores_needed"] == 15
    assert body["reference_configuration"] == {
        "agents": "5–10", "cpu": "16 cores", "accelerators": "one high-end card", "memory": "64 GB", "exact": True,
        "explanation": "10 agents fall in the 5–10 row: 16 cores, one high-end card, 64 GB",
    }
    assert body["explanations"]["accelerators_needed_batched"] == (
        "with batching = ceil(10,000 tok/s ÷ (2,000 tok/s × 1.7 batching gain)) = ceil(2.94) = 3")


def test_it_compares_costs_at_the_given_prices(viewer_api: APIClient) -> None:
    r = _post(viewer_api, COST, {"gpu_server_price": 250_000, "cpu_node_price": 10_000, "module_price": 5_000,
                                 "cpu_nodes": 5, "modules": 10, "concurrent_users": 1000})
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["rule_of_thumb_array_cost"] == 200_000
    assert body["rule_of_thumb_ratio"] == 0.8
    assert body["plan_array_cost"] == 100_000
    assert body["gpu_cost"] == 250_000
    assert body["plan_saving"] == 150_000
    assert body["explanations"]["rule_of_thumb_array_cost"] == "10 CPU nodes × 10,000 + 20 modules × 5,000 = 200,000"


def test_it_returns_a_plotly_figure_with_two_axes(viewer_api: APIClient) -> None:
    r = _post(viewer_api, CHART, WORKED_ARRAY)
    assert r.status_code == 200
    fig = r.json()["figure"]
    names = [t["name"] for t in fig["data"]]
    assert names == ["modules needed", "CPU headroom %", "your plan"]
    assert fig["data"][1]["yaxis"] == "y2"
    assert fig["layout"]["yaxis2"]["overlaying"] == "y"
    modules = dict(zip(fig["data"][0]["x"], fig["data"][0]["y"], strict=True))
    assert modules[1000] == 10
    assert modules[2000] == 20


def test_it_denies_anonymous_callers(anon_api: APIClient) -> None:
    for url, body in [(ARRAY, WORKED_ARRAY), (AGENTS, WORKED_AGENTS), (COST, {}), (CHART, WORKED_ARRAY)]:
        assert _post(anon_api, url, body).status_code in (401, 403)
    assert anon_api.get("/api/v1/planner/what-if/").status_code in (401, 403)


def test_it_lets_operators_and_admins_compute_too(operator_api: APIClient, admin_api: APIClient) -> None:
    assert _post(operator_api, ARRAY, WORKED_ARRAY).status_code == 200
    assert _post(admin_api, AGENTS, WORKED_AGENTS).status_code == 200


def test_it_names_every_missing_field(viewer_api: APIClient) -> None:
    r = _post(viewer_api, ARRAY, {})
    assert r.status_code == 400
    errors = r.json()["errors"]
    assert set(errors) == {"concurrent_users", "request_interval_s", "input_tokens", "output_tokens"}
    assert errors["concurrent_users"] == ["This field is required."]
    r = _post(viewer_api, AGENTS, {})
    assert set(r.json()["errors"]) == {"agents", "inferences_per_s_per_agent", "tokens_per_inference",
                                       "tokens_per_s_per_accelerator"}


@pytest.mark.parametrize("field, value, message", [
    ("concurrent_users", "1000", "must be a number, not a string"),
    ("concurrent_users", "lots", "must be a number, not a string"),
    ("concurrent_users", True, "must be a number, not true/false"),
    ("concurrent_users", None, "This field may not be null."),
    ("concurrent_users", [1000], "must be a number"),
    ("concurrent_users", 0, "must be at least 1"),
    ("concurrent_users", -5, "must be at least 1"),
    ("concurrent_users", 10.5, "must be a whole number"),
    ("concurrent_users", 10**10, "must be at most 1e9"),
    ("concurrent_users", 10**400, "must be at most 1e9"),
    ("request_interval_s", 0, "must be at least 0.001"),
    ("request_interval_s", -2, "must be at least 0.001"),
    ("request_interval_s", 1e-300, "must be at least 0.001"),
    ("output_tokens", 0, "must be at least 1"),
    ("input_tokens", 1e8, "must be at most 1e7"),
    ("module_tops", 0, "must be at least 0.1"),
    ("modules_per_node", 5, "must be at most 4"),
    ("modules_per_node", 0, "must be at least 1"),
    ("usable_fraction", 0, "must be at least 0.01"),
    ("usable_fraction", 1.5, "must be at most 1"),
    ("cores_per_cpu", 0, "must be at least 1"),
    ("core_ips", -1e9, "must be at least 1,000,000"),
    ("gflops_per_token", 0, "must be at least 0.001"),
])
def test_it_rejects_bad_array_input_with_a_message_for_the_field(
    viewer_api: APIClient, field: str, value: Any, message: str
) -> None:
    r = _post(viewer_api, ARRAY, {**WORKED_ARRAY, field: value})
    assert r.status_code == 400
    body = r.json()
    assert body["errors"] == {field: [message]}
    assert body["detail"] == f"{field}: {message}"


def test_it_reports_several_bad_fields_at_once(viewer_api: APIClient) -> None:
    r = _post(viewer_api, ARRAY, {**WORKED_ARRAY, "request_interval_s": 0, "usable_fraction": 2, "cpu_count": "x"})
    assert r.status_code == 400
    assert r.json()["errors"] == {
        "request_interval_s": ["must be at least 0.001"],
        "usable_fraction": ["must be at most 1"],
        "cpu_count": ["must be a number, not a string"],
    }


@pytest.mark.parametrize("field, value, message", [
    ("agents", 0, "must be at least 1"),
    ("agents", 2.5, "must be a whole number"),
    ("tokens_per_s_per_accelerator", 0, "must be at least 1"),
    ("inferences_per_s_per_agent", -1, "must be greater than 0"),
    ("tokens_per_inference", False, "must be a number, not true/false"),
    ("batching_gain", 0.5, "must be at least 1"),
    ("safety_factor", 0.9, "must be at least 1"),
    ("cores_per_agent", 0, "must be greater than 0"),
])
def test_it_rejects_bad_agent_input(viewer_api: APIClient, field: str, value: Any, message: str) -> None:
    r = _post(viewer_api, AGENTS, {**WORKED_AGENTS, field: value})
    assert r.status_code == 400
    assert r.json()["errors"] == {field: [message]}


def test_it_rejects_bad_prices(viewer_api: APIClient) -> None:
    r = _post(viewer_api, COST, {"gpu_server_price": 0, "module_price": "cheap"})
    assert r.status_code == 400
    assert r.json()["errors"] == {"gpu_server_price": ["must be at least 1"],
                                  "module_price": ["must be a number, not a string"]}


@pytest.mark.parametrize("raw", [
    '{"concurrent_users": NaN, "request_interval_s": 2, "input_tokens": 1, "output_tokens": 1}',
    '{"concurrent_users": 1000, "request_interval_s": Infinity, "input_tokens": 1, "output_tokens": 1}',
    '[1, 2, 3]',
    '"1000"',
    '{"concurrent_users": 1000,',
])
def test_it_answers_malformed_bodies_with_400(viewer_api: APIClient, raw: str) -> None:
    r = viewer_api.post(ARRAY, raw, content_type="application/json")
    assert r.status_code == 400
    assert r.json()["detail"]


@pytest.mark.parametrize("extreme", ["low", "high"])
def test_it_answers_every_in_bounds_extreme_without_error(viewer_api: APIClient, extreme: str) -> None:
    # Every field at its bound at once, in the direction that makes the numbers largest or smallest.
    big = {"concurrent_users": 10**9, "request_interval_s": 0.001, "input_tokens": 10**7, "output_tokens": 10**7,
           "gflops_per_token": 100_000, "module_tops": 0.1, "modules_per_node": 1, "instructions_per_request": 10**12,
           "cpu_count": 1, "cores_per_cpu": 1, "core_ips": 1_000_000, "usable_fraction": 0.01}
    small = {"concurrent_users": 1, "request_interval_s": 86_400, "input_tokens": 0, "output_tokens": 1,
             "gflops_per_token": 0.001, "module_tops": 100_000, "modules_per_node": 4, "instructions_per_request": 1,
             "cpu_count": 10**6, "cores_per_cpu": 1024, "core_ips": 10**12, "usable_fraction": 1}
    body = big if extreme == "high" else small
    for url in (ARRAY, CHART):
        r = _post(viewer_api, url, body)
        assert r.status_code == 200, r.content
    plan = _post(viewer_api, ARRAY, body).json()
    if extreme == "high":
        assert plan["modules_needed"] == 10**22  # 1e12 req/s × 1e7 tokens × 1e5 GFLOPs ÷ 1e3 ÷ 0.1 TOPS
        assert plan["cpu_headroom"] < 0
    else:
        assert plan["modules_needed"] == 1 and plan["nodes_needed"] == 1
        assert plan["cpu_headroom"] > 0.999
    agents = {"agents": 10**7, "inferences_per_s_per_agent": 10_000, "tokens_per_inference": 10**7,
              "tokens_per_s_per_accelerator": 1, "cores_per_agent": 64, "safety_factor": 10, "batching_gain": 1}
    r = _post(viewer_api, AGENTS, agents if extreme == "high" else {
        "agents": 1, "inferences_per_s_per_agent": 1e-9, "tokens_per_inference": 1e-9,
        "tokens_per_s_per_accelerator": 10**9, "cores_per_agent": 1e-9, "safety_factor": 1, "batching_gain": 100})
    assert r.status_code == 200, r.content
    r = _post(viewer_api, COST, {"gpu_server_price": 1, "cpu_node_price": 10**9, "module_price": 10**9,
                                 "cpu_nodes": 10**6, "modules": 10**7, "concurrent_users": 10**9})
    assert r.status_code == 200, r.content


def test_it_refuses_numbers_that_overflow_to_infinity(viewer_api: APIClient) -> None:
    # JSON's 1e400 parses as an infinite float.
    raw = '{"concurrent_users": 1000, "request_interval_s": 1e400, "input_tokens": 1, "output_tokens": 1}'
    r = viewer_api.post(ARRAY, raw, content_type="application/json")
    assert r.status_code == 400
    assert r.json()["errors"] == {"request_interval_s": ["must be a finite number"]}


def test_it_publishes_the_planner_in_the_schema(viewer_api: APIClient) -> None:
    r = viewer_api.get("/api/schema/", {"format": "json"})
    assert r.status_code == 200
    paths = r.json()["paths"]
    for p in ("/api/v1/planner/array/", "/api/v1/planner/agents/", "/api/v1/planner/cost/",
              "/api/v1/planner/array/chart/", "/api/v1/planner/what-if/"):
        assert p in paths
    schemas = r.json()["components"]["schemas"]
    users = schemas["ArrayInputRequest"]["properties"]["concurrent_users"]
    assert users["type"] == "integer"
    assert users["minimum"] == 1 and users["maximum"] == 10**9
    tokens = schemas["AgentInputRequest"]["properties"]["tokens_per_inference"]
    assert (tokens["type"], tokens["minimum"], tokens["exclusiveMinimum"]) == ("number", 0, True)
    assert "cpu_headroom" in schemas["ArrayPlan"]["properties"]
