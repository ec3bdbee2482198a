"""What-if: the plan for observed traffic (or the caller's numbers) against the installed fleet."""

import datetime as dt
import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from apps.inventory.choices import ModuleState, NodeState, TierKind
from apps.inventory.models import Module, ModuleType, Node, Rack, Tier
from apps.simulator.demo import seed_demo

pytestmark = pytest.mark.django_db

URL = "/api/v1/planner/what-if/"
WORKED = {"concurrent_users": 1000, "request_interval_s": 2, "input_tokens": 500, "output_tokens": 100}


@pytest.fixture
def small_fleet(db: Any) -> dict[str, Any]:
    """Two 8-core 3 GHz access nodes (4e9/s usable) and three hybrid nodes with two 30-TOPS modules each."""
    rack = Rack.objects.create(name="r1")
    access = Tier.objects.get(kind=TierKind.ACCESS_LOGIC)
    hybrid = Tier.objects.get(kind=TierKind.HYBRID_INFERENCE)
    mtype = ModuleType.objects.create(vendor="V", model="M30", form_factor="m2", int8_tops=Decimal("30"),
                                      power_w=10, pcie_lanes=4)
    slot = iter(range(1, 100))

    def node(name: str, tier: Tier, state: str, modules: int = 0, **spec: Any) -> Node:
        n = Node.objects.create(hostname=name, rack=rack, slot=next(slot), tier=tier, state=state,
                                cpu_cores=8, cpu_clock_ghz=Decimal("3.00"), **spec)
        for i in range(modules):
            Module.objects.create(serial=f"{name}-{i}", module_type=mtype, node=n, slot=i)
        return n

    node("a1", access, NodeState.ACTIVE)
    node("a2", access, NodeState.ACTIVE)
    node("a3", access, NodeState.CORDONED)  # not serving new work: not installed capacity
    for i in range(3):
        node(f"h{i}", hybrid, NodeState.ACTIVE, modules=2)
    node("h-standby", hybrid, NodeState.STANDBY, modules=2)
    quarantined = node("h-bad", hybrid, NodeState.ACTIVE)
    Module.objects.create(serial="q-0", module_type=mtype, node=quarantined, slot=0, state=ModuleState.QUARANTINED)
    return {"access": access, "hybrid": hybrid, "type": mtype}


def _tier(body: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(t for t in body["tiers"] if t["tier"] == kind)


def test_it_plans_the_worked_example_against_a_small_fleet(viewer_api: APIClient, small_fleet: Any) -> None:
    r = viewer_api.post(URL, WORKED, format="json")
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["demand"]["source"] == "user"
    # One sentence, each figure once: the page prints it as the demand.
    assert body["demand"]["explanation"] == ("1,000 users ÷ 2 s = 500 req/s; 500 input tokens per request given; "
                                             "100 output tokens per request given")
    assert body["plan"]["modules_needed"] == 10
    access = _tier(body, "access_logic")
    assert access["active_nodes"] == 2
    assert access["installed"]["cpu_capacity_per_s"] == 4e9
    assert access["installed"]["cpu_headroom"] == 0.9375
    assert access["nodes_needed"] == 1  # 2.5e8/s ÷ 2e9/s per node
    assert access["nodes_delta"] == -1
    assert access["action"] == "release 1 node (drain first); formula binds: the formula needs 1"

    hybrid = _tier(body, "hybrid_inference")
    # h-bad is active but its only module is quarantined: 4 active nodes, 6 serving modules.
    assert hybrid["active_nodes"] == 4
    assert hybrid["standby_nodes"] == 1
    assert hybrid["installed"]["modules"] == 6
    assert hybrid["installed"]["tops"] == 180
    assert hybrid["needed"]["module_tops"] == 30
    assert hybrid["needed"]["modules_per_node"] == 1.5  # 6 modules on 4 active nodes
    assert hybrid["modules_delta"] == 4  # 10 needed − 6
    assert hybrid["nodes_needed"] == 7  # ceil(10 ÷ 1.5)
    assert hybrid["nodes_delta"] == 3
    assert hybrid["action"] == ("modules: add 4; nodes: add 3 nodes (1 from standby, 2 new); "
                                "formula binds: the formula needs 7")
    assert hybrid["explanations"]["modules_delta"] == "10 needed − 6 installed on active nodes = +4"


def test_it_uses_given_module_size_and_density(viewer_api: APIClient, small_fleet: Any) -> None:
    r = viewer_api.post(URL, {**WORKED, "module_tops": 60, "modules_per_node": 2}, format="json")
    hybrid = _tier(r.json(), "hybrid_inference")
    assert hybrid["needed"]["modules"] == 5
    assert hybrid["modules_delta"] == -1
    assert hybrid["nodes_needed"] == 3
    assert hybrid["nodes_delta"] == -1
    assert hybrid["action"] == ("modules: release 1; nodes: release 1 node (drain first); "
                                "formula binds: the formula needs 3")


def test_it_keeps_recommendations_within_the_tier_limits(viewer_api: APIClient, small_fleet: Any) -> None:
    Tier.objects.filter(kind=TierKind.HYBRID_INFERENCE).update(max_active_nodes=5)
    Tier.objects.filter(kind=TierKind.ACCESS_LOGIC).update(min_active_nodes=2)
    body = viewer_api.post(URL, WORKED, format="json").json()
    hybrid = _tier(body, "hybrid_inference")
    assert hybrid["nodes_needed"] == 7
    assert hybrid["nodes_delta"] == 1
    assert "the plan needs 7, above the tier maximum of 5" in hybrid["action"]
    access = _tier(body, "access_logic")
    assert access["nodes_delta"] == 0
    assert access["action"] == "no change; minimum binds: the tier minimum keeps 2 active (the formula needs 1)"


def test_it_asks_for_numbers_when_there_is_no_telemetry(viewer_api: APIClient, small_fleet: Any) -> None:
    r = viewer_api.get(URL)
    assert r.status_code == 409  # well-formed: the state (no telemetry) has no numbers to fill in
    body = r.json()
    assert set(body["errors"]) == {"requests_per_s", "input_tokens", "output_tokens"}
    assert body["errors"]["input_tokens"] == ["no telemetry yet; give your numbers: input tokens per request"]
    assert "no telemetry yet; give your numbers" in body["detail"]
    # Only the missing numbers are asked for.
    r = viewer_api.post(URL, {"requests_per_s": 10, "input_tokens": 1}, format="json")
    assert r.status_code == 409
    assert set(r.json()["errors"]) == {"output_tokens"}


def test_it_reads_query_strings_on_get(viewer_api: APIClient, small_fleet: Any) -> None:
    r = viewer_api.get(URL, {"requests_per_s": "500", "input_tokens": "500", "output_tokens": "100"})
    assert r.status_code == 200, r.json()
    assert r.json()["plan"]["modules_needed"] == 10
    r = viewer_api.get(URL, {"requests_per_s": "lots", "input_tokens": "NaN", "output_tokens": "100"})
    assert r.status_code == 400
    assert r.json()["errors"] == {"requests_per_s": ["must be a number"], "input_tokens": ["must be a finite number"]}


def test_it_rejects_half_given_traffic(viewer_api: APIClient, small_fleet: Any) -> None:
    r = viewer_api.post(URL, {"concurrent_users": 1000, "input_tokens": 1, "output_tokens": 1}, format="json")
    assert r.status_code == 400
    assert r.json()["errors"] == {"request_interval_s": ["give concurrent_users and request_interval_s together"]}
    r = viewer_api.post(URL, {**WORKED, "requests_per_s": 5}, format="json")
    assert r.status_code == 400
    assert set(r.json()["errors"]) == {"requests_per_s"}
    r = viewer_api.post(URL, {**WORKED, "target_cpu_headroom": 1}, format="json")
    assert r.json()["errors"] == {"target_cpu_headroom": ["must be at most 0.95"]}


def test_it_denies_anonymous(anon_api: APIClient) -> None:
    assert anon_api.post(URL, WORKED, format="json").status_code in (401, 403)


def test_it_plans_against_the_demo_fleet(viewer_api: APIClient) -> None:
    seed_demo()
    r = viewer_api.post(URL, WORKED, format="json")
    assert r.status_code == 200, r.json()
    body = r.json()
    assert [t["tier"] for t in body["tiers"]] == ["access_logic", "hybrid_inference", "external_large_model"]
    hybrid = _tier(body, "hybrid_inference")
    active = Node.objects.filter(tier__kind=TierKind.HYBRID_INFERENCE, state=NodeState.ACTIVE)
    serving = Module.objects.filter(node__in=active, state__in=[ModuleState.HEALTHY, ModuleState.DEGRADED])
    tops = sum(m.module_type.int8_tops for m in serving.select_related("module_type"))
    assert hybrid["active_nodes"] == active.count() == 33
    # 9 standby nodes, 4 of them in the gray pool (2 per module type): they never serve.
    assert Node.objects.filter(tier__kind=TierKind.HYBRID_INFERENCE, state=NodeState.STANDBY).count() == 9
    assert hybrid["standby_nodes"] == 9 - Node.objects.filter(gray=True).count() == 5
    assert hybrid["installed"]["modules"] == serving.count()
    assert hybrid["installed"]["tops"] == float(tops)
    # 300 TFLOPs/s at the installed modules' mean TOPS.
    needed = math.ceil(Fraction(300) / (Fraction(tops) / serving.count()))
    assert hybrid["needed"]["modules"] == needed
    assert hybrid["modules_delta"] == needed - serving.count()
    # Far more installed than the worked example needs; releasing stops at the tier minimum (10).
    assert hybrid["nodes_delta"] == 10 - 33
    access = _tier(body, "access_logic")
    assert access["active_nodes"] == 18
    assert access["nodes_delta"] == 6 - 18
    external = _tier(body, "external_large_model")
    assert external["installed"] == {"endpoints": 1}
    assert external["nodes_needed"] is None


def _observe(*, samples: int, requests_per_s: int, input_tokens: int, output_tokens: int) -> None:
    """Gateway telemetry through the real path: ingest 10-second tier samples, then roll them up."""
    from apps.agents.services import agent_token_issue
    from apps.telemetry.ingest.receive import telemetry_ingest
    from apps.telemetry.rollups.rollup import telemetry_rollup

    token, _key = agent_token_issue(kind="gateway", node=None, actor="test")
    now = timezone.now()
    arrivals = requests_per_s * 10
    tier_samples = [
        {"time": (now - dt.timedelta(seconds=10 * (i + 1))).isoformat().replace("+00:00", "Z"),
         "tier": "access_logic", "queue_depth": 1, "arrivals": arrivals, "completions": arrivals,
         "input_tokens": arrivals * input_tokens, "output_tokens": arrivals * output_tokens, "window_s": 10}
        for i in range(samples)
    ]
    telemetry_ingest(token=token, payload={"batch_id": "planner-test-1", "tier_samples": tier_samples}, now=now)
    telemetry_rollup(now=now)


def test_it_plans_for_observed_traffic(viewer_api: APIClient, small_fleet: Any) -> None:
    pytest.importorskip("apps.telemetry.selectors.traffic")
    _observe(samples=30, requests_per_s=500, input_tokens=500, output_tokens=100)
    r = viewer_api.get(URL)
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["demand"]["source"] == "telemetry"
    assert body["demand"]["window_s"] == 900
    assert body["demand"]["requests_per_s"] == pytest.approx(500)
    assert body["demand"]["input_tokens_per_request"] == pytest.approx(500)
    assert body["demand"]["output_tokens_per_request"] == pytest.approx(100)
    assert body["demand"]["explanation"].startswith("observed over the last 900 s: 500 req/s")
    assert body["plan"]["modules_needed"] == 10
    assert _tier(body, "hybrid_inference")["modules_delta"] == 4


def test_it_lets_the_caller_override_part_of_the_observed_traffic(viewer_api: APIClient, small_fleet: Any) -> None:
    pytest.importorskip("apps.telemetry.selectors.traffic")
    _observe(samples=12, requests_per_s=500, input_tokens=500, output_tokens=100)
    r = viewer_api.post(URL, {"output_tokens": 200}, format="json")
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["demand"]["source"] == "telemetry+user"
    assert body["demand"]["output_tokens_per_request"] == 200
    assert body["demand"]["explanation"] == ("observed over the last 900 s: 500 req/s, 500 input tokens per request; "
                                             "200 output tokens per request given")
    assert body["plan"]["compute_tflops"] == pytest.approx(600)
    assert body["plan"]["modules_needed"] == 20


def test_it_answers_in_bounds_extremes_without_error(viewer_api: APIClient, small_fleet: Any) -> None:
    high = {"requests_per_s": 10**9, "input_tokens": 10**7, "output_tokens": 10**7, "gflops_per_token": 100_000,
            "module_tops": 0.1, "modules_per_node": 1, "instructions_per_request": 10**12, "core_ips": 1_000_000,
            "usable_fraction": 0.01, "target_cpu_headroom": 0.95}
    low = {"concurrent_users": 1, "request_interval_s": 86_400, "input_tokens": 0, "output_tokens": 0,
           "gflops_per_token": 0.001, "instructions_per_request": 1, "core_ips": 10**12, "usable_fraction": 1}
    for body in (high, low):
        r = viewer_api.post(URL, body, format="json")
        assert r.status_code == 200, r.content
    assert _tier(r.json(), "hybrid_inference")["needed"]["modules"] == 0
