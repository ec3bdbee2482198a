"""Helpers of the live-page browser tests (the ``dashboard_stack`` fixture is in conftest.py):
telemetry posted through the ingest service, the logins, the charts of each page, and waits."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from apps.inventory.models import Node

OPERATOR = ("dash-operator", "dash-operator-pw-1")
VIEWER = ("dash-viewer", "dash-viewer-pw-1")
STAGES = ["perception", "intent", "planning", "tool_call", "generation", "memory_update"]
CHARTS = {"/": ["queue", "util", "latency", "breakdown"], "/racks/": ["racks"]}


def post_telemetry(*, at: dt.datetime, seq: int, in_flight: dict[str, int] | None = None) -> None:
    """One batch per node and one gateway batch at ``at``, through the ingest service."""
    from apps.agents.models import AgentToken
    from apps.agents.services import agent_token_issue
    from apps.telemetry.ingest.receive import telemetry_ingest

    rng = random.Random(seq)
    tokens = {t.node_id: t for t in AgentToken.objects.filter(kind="node", revoked_at__isnull=True)}
    for node in Node.objects.exclude(state="retired").prefetch_related("modules"):
        token = tokens.get(node.pk) or agent_token_issue(kind="node", node=node, actor="test")[0]
        tokens[node.pk] = token
        busy = node.state == "active"
        flight = (in_flight or {}).get(node.hostname, rng.randint(1, 6) if busy else 0)
        telemetry_ingest(token=token, now=at + dt.timedelta(seconds=1), payload={
            "batch_id": f"t-{node.hostname}-{seq}", "node_samples": [{
                "time": at.isoformat(), "node": node.hostname, "cpu_util": rng.uniform(0.3, 0.8) if busy else 0.03,
                "mem_util": 0.4, "load1": 2.0, "in_flight": flight, "threads": 64,
                "modules": [{"serial": m.serial, "util": rng.uniform(0.2, 0.9) if busy else 0.0,
                             "temp_c": rng.uniform(45, 80), "power_w": rng.uniform(8, 20), "link_width": 4,
                             "link_width_expected": 4, "ecc_corrected": 0, "ecc_uncorrected": 0, "errors": 0}
                            for m in node.modules.all()]}]})
    gateway = AgentToken.objects.filter(kind="gateway", revoked_at__isnull=True).first() or \
        agent_token_issue(kind="gateway", node=None, actor="test")[0]
    tiers = ["access_logic", "hybrid_inference", "external_large_model"]
    telemetry_ingest(token=gateway, now=at + dt.timedelta(seconds=1), payload={
        "batch_id": f"t-gateway-{seq}",
        "tier_samples": [{"time": at.isoformat(), "tier": t, "queue_depth": rng.randint(2, 30), "arrivals": 900,
                          "completions": 880, "window_s": 10} for t in tiers],
        "stage_samples": [{"time": at.isoformat(), "tier": t, "stage": s, "window_s": 10, "count": 200,
                           "p50_ms": 20.0 * (i + 1) + rng.uniform(0, 10), "p95_ms": 45.0 * (i + 1),
                           "p99_ms": 70.0 * (i + 1), "max_ms": 90.0 * (i + 1)}
                          for t in tiers for i, s in enumerate(STAGES)
                          if (s in ("intent", "generation")) != (t == "access_logic")]})


# Data points drawn in the chart named by its data-figure (0 until Plotly has drawn it).
POINTS_JS = """name => { const gd = document.querySelector(`[data-figure="${name}"]`);
                         if (!gd || !gd.data) return 0;
                         return gd.data.reduce((n, t) => n + ((t.z ? t.z.flat().filter(v => v !== null) : (t.x || []))
                                                             .length), 0); }"""


def points(page: Any, name: str) -> int:
    """Data points drawn in the chart ``name`` (0 until Plotly has drawn it)."""
    return int(page.evaluate(POINTS_JS, name))


def wait_points(page: Any, name: str, at_least: int = 1) -> None:
    """Wait until the chart ``name`` has at least ``at_least`` data points drawn."""
    page.wait_for_function(f"([name, n]) => ({POINTS_JS})(name) >= n", arg=[name, at_least])


def wait_live(page: Any) -> None:
    page.wait_for_function("() => document.querySelector('#live-status').dataset.state === 'live'")


def wait_snapshot(page: Any) -> None:
    """Wait until the page holds a fleet snapshot (the resync's after the socket opened, or a broadcast
    one): from then on a node's state that differs in a later snapshot shows in the page. Pages with no
    snapshot in their HTML (the node list, the audit log) learn the states only then: a change made
    before it counts as the state they started with."""
    page.wait_for_function("() => !!window.__snapshot")
