"""What-if against the fleet as measured: the demo fleet played at its busy hour (15:00) and at
its quiet hour (04:00) through the real ingest. The formulas size from request counts only; the
plan also reads the tiers' measured utilisation and queue (the capacity function the lifecycle's
guard uses) and says which limit binds. A tier running hot, or whose queue grows, is not released."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.common.templatetags.numbers import number_text
from apps.inventory.models import Tier
from apps.operations import capacity
from apps.operations.scaling import autoscaler_run
from apps.planner.what_if import (
    AutoscalerView,
    Demand,
    NodeCapacity,
    TierInstalled,
    WhatIfParams,
    plan_against_installed,
)
from apps.simulator.demo import seed_demo
from tests.fleet_play import play_demo_hour

URL = "/api/v1/planner/what-if/"
ARRAY_TIERS = ("access_logic", "hybrid_inference")


def _plan(api: APIClient) -> dict[str, dict[str, Any]]:
    r = api.post(URL, {}, format="json")
    assert r.status_code == 200, r.json()
    assert r.json()["demand"]["source"] == "telemetry"
    return {t["tier"]: t for t in r.json()["tiers"]}


@pytest.mark.django_db
def test_it_recommends_no_release_for_a_busy_tier_and_names_the_limit(viewer_api: APIClient) -> None:
    seed_demo()
    play_demo_hour(15.0)
    tiers = _plan(viewer_api)
    for kind in ARRAY_TIERS:
        t = tiers[kind]
        assert t["nodes_delta"] >= 0, (kind, t["action"], t["explanations"])
        assert t["binding"] in ("utilisation", "queue"), (kind, t["binding"], t["explanations"])
        assert f"{t['binding']} binds" in t["action"], t["action"]
        assert "measured" in t["explanations"], t["explanations"]
    # The access & logic tier runs at about half its CPU: that is why it keeps its nodes.
    access = tiers["access_logic"]
    assert 0.4 < access["installed"]["measured_utilisation"] < 0.8, access["installed"]
    # Every figure in the text the page shows is printed as every page prints it: 434 TFLOPs/s,
    # 37.5 TOPS, 2.64 per node, 293 req/s; never 433.5432 or 292.5.
    # The demo's autoscaler (dry run) decides on the same fleet: each array tier shows its figure beside
    # the plan's, with why they differ, from the numbers of both.
    for tier in Tier.objects.filter(kind__in=ARRAY_TIERS):
        autoscaler_run(tier=tier)
    body = viewer_api.get(URL).json()
    texts = [body["demand"]["explanation"], *body["explanations"].values()]
    for t in body["tiers"]:
        texts += [t["action"], *t["explanations"].values()]
        if t["tier"] in ARRAY_TIERS:
            a = t["autoscaler"]
            assert a["dry_run"] and a["current"] == t["active_nodes"], a
            assert a["comparison"].startswith(f"The planner's {t['nodes_needed']} sizes the tier for throughput: "), a
            assert (f"The autoscaler's {a['desired']} (dry run) sizes it for the waiting work: "
                    f"{number_text(a['queue_depth'])} requests queued") in a["comparison"], a
            texts.append(a["comparison"])
    assert not [(f, text) for text in texts for f in _raw_figures(text)]


def _raw_figures(text: str) -> list[str]:
    """Decimal figures in ``text`` that |num would print otherwise (scientific notation aside)."""
    found = re.findall(r"(?<![\w.])-?\d[\d,]*\.\d+(?![\de])", text)
    return [f for f in found if number_text(float(f.replace(",", ""))) != f]


@pytest.mark.django_db
def test_it_recommends_a_release_at_the_quiet_hour_and_names_the_limit(viewer_api: APIClient) -> None:
    seed_demo()
    play_demo_hour(4.0)
    tiers = _plan(viewer_api)
    for kind in ARRAY_TIERS:
        t = tiers[kind]
        assert t["nodes_delta"] < 0, (kind, t["action"], t["explanations"])
        assert t["action"].startswith("release") or "nodes: release" in t["action"], t["action"]
        assert t["binding"] in ("formula", "utilisation", "queue", "minimum"), t["binding"]
        assert f"{t['binding']} binds" in t["action"], t["action"]


def _access(active: int) -> TierInstalled:
    nodes = tuple(NodeCapacity(f"a{i}", 8, 3) for i in range(active))
    return TierInstalled("access_logic", "Access & logic", nodes, (), 2, 40)


def _load(**kw: Any) -> capacity.TierLoad:
    base = capacity.TierLoad(kind="access_logic", name="Access & logic", min_active_nodes=2, active_nodes=10,
                             node_cpu_ips=2e9, requests_per_s=100.0, completions_per_s=100.0, busy_nodes=2.0)
    return replace(base, **kw)


DEMAND = Demand(100, 500, 100, "telemetry", "observed")


def test_a_growing_queue_adds_nodes_and_binds() -> None:
    result = plan_against_installed(DEMAND, WhatIfParams(), [_access(10)],
                                    measured={"access_logic": _load(requests_per_s=150.0, completions_per_s=100.0)})
    t = result.tiers[0]
    assert t.binding == "queue" and t.nodes_needed == 15 and t.nodes_delta == 5, (t.action, t.explanations)


def test_a_release_stops_where_utilisation_would_pass_the_release_threshold() -> None:
    # 4 busy node-equivalents: the tier may go down to 4 ÷ 50 % = 8 nodes, not to the formula's 1.
    result = plan_against_installed(DEMAND, WhatIfParams(), [_access(10)],
                                    measured={"access_logic": _load(busy_nodes=4.0)})
    t = result.tiers[0]
    assert t.binding == "utilisation" and t.nodes_delta == -2, (t.action, t.explanations)
    assert "utilisation binds" in t.action


def test_a_demand_given_by_the_caller_scales_the_measured_work() -> None:
    # Twice the observed requests: twice the measured work (6 busy → 12 node-equivalents ÷ 70 % = 18 nodes).
    doubled = Demand(200, 500, 100, "user", "200 req/s given")
    result = plan_against_installed(doubled, WhatIfParams(), [_access(10)],
                                    measured={"access_logic": _load(busy_nodes=6.0)})
    t = result.tiers[0]
    assert t.binding == "utilisation" and t.nodes_needed == 18 and t.nodes_delta == 8, (t.action, t.explanations)


def test_without_measurements_the_formula_binds() -> None:
    result = plan_against_installed(DEMAND, WhatIfParams(), [_access(10)])
    t = result.tiers[0]
    assert t.binding in ("formula", "minimum") and "binds" in t.action


def test_the_autoscaler_s_figure_stands_beside_the_plan_with_why_they_differ() -> None:
    # 6 busy node-equivalents ÷ 70 % = 9 nodes for the plan; 50 queued ÷ 2 a node = 25 for the autoscaler,
    # which its step limit holds at 14: the sentence says both, from these numbers.
    view = AutoscalerView(current=10, queue_depth=50.0, target_per_node=2.0, raw=25, desired=14, dry_run=False)
    result = plan_against_installed(DEMAND, WhatIfParams(), [_access(10)],
                                    measured={"access_logic": _load(busy_nodes=6.0, requests_per_s=100.0)},
                                    autoscaler={"access_logic": view})
    t = result.tiers[0]
    assert t.nodes_needed == 10 and t.autoscaler is not None, (t.action, t.explanations)
    assert t.autoscaler["raw"] == 25 and t.autoscaler["desired"] == 14
    assert t.autoscaler["comparison"] == (
        "The planner's 10 sizes the tier for throughput: the measured work (6 busy nodes) keeps the tier above the "
        "50 % utilisation a release may take it to. The autoscaler's 14 sizes it for the waiting work: 50 requests "
        "queued ÷ its target of 2 a node = 25 nodes (5 a node over the 10 active now), and its bounds, "
        "stabilisation and step limits make that 14; neither reads what the other does, so they agree only when "
        "the queue per node follows the work per node.")

    # For the caller's demand the plan scales the work; the autoscaler still reads the queue now.
    doubled = Demand(200, 500, 100, "user", "200 req/s given")
    within = replace(view, queue_depth=21.0, raw=10, desired=10, dry_run=True)  # 2.1 a node: within tolerance
    result = plan_against_installed(doubled, WhatIfParams(), [_access(10)],
                                    measured={"access_logic": _load(busy_nodes=6.0)},
                                    autoscaler={"access_logic": within})
    text = str(result.tiers[0].autoscaler["comparison"])  # type: ignore[index]
    assert text.startswith("The planner's 18 sizes the tier for throughput: the measured work (12 busy nodes) at "
                           "the 70 % target utilisation. The autoscaler's 10 (dry run) sizes it for the waiting work "
                           "of the traffic now, not the demand planned here: 21 requests queued over 10 nodes is "
                           "2.1 a node, within its tolerance of its target of 2 a node, so its formula keeps 10;"), text


def test_without_an_autoscaler_decision_the_tier_shows_none() -> None:
    result = plan_against_installed(DEMAND, WhatIfParams(), [_access(10)], measured={"access_logic": _load()})
    assert result.tiers[0].autoscaler is None
