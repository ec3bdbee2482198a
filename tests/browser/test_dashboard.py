"""The live dashboard in headless Chromium against a real ASGI server (uvicorn, websockets)
and the broadcaster process, on the demo fleet with telemetry posted through the ingest
service: every chart renders with data, a drain started from the node page shows live
without a reload, a viewer gets no action controls, an anonymous websocket is refused.
Screenshots go to artifacts/dashboard-*.png."""

from __future__ import annotations

import datetime as dt
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from apps.inventory.models import Node
from controlplane.engines import BASE_DIR, VAR_DIR, read_state
from tests.agent import live as agent_live
from tests.agent.live import LiveServer
from tests.browser.conftest import login, restore_migration_rows, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.live]

OPERATOR = ("dash-operator", "dash-operator-pw-1")
VIEWER = ("dash-viewer", "dash-viewer-pw-1")
STAGES = ["perception", "intent", "planning", "tool_call", "generation", "memory_update"]
CHARTS = {"/": ["queue", "util", "latency", "breakdown"], "/racks/": ["racks"]}


def post_telemetry(*, at: dt.datetime, seq: int, in_flight: dict[str, int] | None = None) -> None:
    """One batch per node and one gateway batch at ``at``, through the ingest service."""
    from apps.telemetry.models import AgentToken
    from apps.telemetry.services import agent_token_issue, telemetry_ingest

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


@pytest.fixture
def dashboard_stack(transactional_db: Any, tmp_path: Path) -> Iterator[LiveServer]:
    """The demo fleet with 8 minutes of telemetry rolled up, a uvicorn process and the broadcaster."""
    from apps.accounts.services import user_ensure
    from apps.inventory.demo import seed_demo
    from apps.telemetry.services import telemetry_rollup

    restore_migration_rows()
    seed_demo()
    user_ensure(username=OPERATOR[0], password=OPERATOR[1], role="operator")
    user_ensure(username=VIEWER[0], password=VIEWER[1], role="viewer")
    now = timezone.now()
    for i in range(10):
        post_telemetry(at=now - dt.timedelta(seconds=50 * (10 - i)), seq=i)
    telemetry_rollup(now=now, since=now - dt.timedelta(minutes=10))

    server = LiveServer(tmp_path)
    server.start()
    env = {**os.environ, "DATABASE_URL": agent_live.test_database_url(), "CONTROLPLANE_VAR_DIR": str(VAR_DIR),
           "REDIS_URL": os.environ.get("REDIS_URL") or read_state()["REDIS_URL"]}
    log = open(tmp_path / "broadcast.log", "ab")  # noqa: SIM115 - closed with the process
    broadcaster = subprocess.Popen([sys.executable, "manage.py", "broadcast", "--interval", "0.5"], cwd=BASE_DIR,
                                   env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    try:
        yield server
    finally:
        broadcaster.terminate()
        broadcaster.wait(10)
        server.kill()


def _points(page: Any, name: str) -> int:
    """Data points drawn in the chart ``name`` (0 until Plotly has drawn it)."""
    return int(page.evaluate(
        """name => { const gd = document.querySelector(`[data-figure="${name}"]`);
                     if (!gd || !gd.data) return 0;
                     return gd.data.reduce((n, t) => n + ((t.z ? t.z.flat().filter(v => v !== null) : (t.x || []))
                                                         .length), 0); }""", name))


def _wait_live(page: Any) -> None:
    page.wait_for_function("() => document.querySelector('#live-status').dataset.state === 'live'")


def test_it_renders_every_chart_live_and_drains_a_node_in_place(browser_page: Any,
                                                                dashboard_stack: LiveServer) -> None:
    page = browser_page
    login(page, dashboard_stack, *OPERATOR, next_url="/")
    _wait_live(page)
    for name in CHARTS["/"]:
        assert _points(page, name) > 0, f"chart {name} has no data"
    # a snapshot a second: the live tail of the queue chart grows without a reload
    page.evaluate("window.__noReload = 1")
    page.wait_for_function("""() => document.querySelector('#chart-queue').data
                                .filter(t => t.meta && t.meta.role === 'live').some(t => t.x.length >= 2)""")
    page.click(".ranges .range[data-minutes='15']")
    page.wait_for_function("() => new URL(location.href).searchParams.get('minutes') === '15'")
    page.wait_for_timeout(800)
    for name in CHARTS["/"]:
        assert _points(page, name) > 0, f"chart {name} lost its data on a range change"
    screenshot(page, "dashboard-fleet")

    # a dropped socket: the page says so, reconnects by itself and re-fetches the snapshot over REST
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url) if "/api/v1/live/snapshot/" in r.url else None)
    page.evaluate("Live.state.socket.close()")
    page.wait_for_function("() => document.querySelector('#live-status').dataset.state === 'reconnecting'")
    _wait_live(page)
    page.wait_for_timeout(500)
    assert fetched, "no REST snapshot after the reconnect"
    assert page.evaluate("window.__noReload") == 1

    page.goto(f"{dashboard_stack.url}/racks/")
    _wait_live(page)
    assert _points(page, "racks") >= 50
    page.select_option("#rack-metric", "state")
    page.wait_for_timeout(1200)
    assert _points(page, "racks") >= 50
    screenshot(page, "dashboard-racks")

    hybrid = Node.objects.get(hostname="n-r1-07").tier_id
    page.goto(f"{dashboard_stack.url}/tiers/{hybrid}/")
    _wait_live(page)
    for name in ["queue", "util", "latency", "breakdown"]:
        assert _points(page, name) > 0, f"tier chart {name} has no data"
    screenshot(page, "dashboard-tier")

    node = Node.objects.get(hostname="n-r1-07")
    post_telemetry(at=timezone.now(), seq=100, in_flight={"n-r1-07": 4})
    page.goto(f"{dashboard_stack.url}/nodes/{node.pk}/")
    _wait_live(page)
    assert _points(page, "node") > 0 and _points(page, "modules") > 0
    assert "Active" in page.inner_text("#node-state")
    page.evaluate("window.__noReload = 1")
    page.click("#node-actions button[data-action=drain]")
    page.fill("#action-reason", "replace a fan (browser test)")
    page.click("#action-confirm")
    page.wait_for_function("() => document.querySelector('#node-state').innerText.includes('Draining')")
    page.wait_for_function("() => document.querySelector('#drain-waiting').innerText.includes('waiting for')")
    assert "replace a fan" in page.inner_text("#node-hold")
    screenshot(page, "dashboard-node-draining")

    # the node reports zero in flight and the drain controller completes it: the page hears it live
    from apps.operations.services import drains_advance

    post_telemetry(at=timezone.now(), seq=101, in_flight={"n-r1-07": 0})
    drains_advance()
    page.wait_for_function("() => document.querySelector('#node-state').innerText.includes('Drained')",
                           timeout=10_000)
    page.wait_for_function("() => document.querySelector('#drain-waiting').innerText.includes('drained')")
    assert page.evaluate("window.__noReload") == 1  # the same document all along: no reload
    screenshot(page, "dashboard-node-drained")


def test_it_hides_actions_from_a_viewer_and_refuses_an_anonymous_websocket(
        browser_page: Any, chromium_browser: Any, dashboard_stack: LiveServer) -> None:
    page = browser_page
    login(page, dashboard_stack, *VIEWER, next_url="/")
    _wait_live(page)
    assert page.locator("button.act").count() == 0
    assert page.locator("#action-dialog").count() == 0
    node = Node.objects.get(hostname="n-r1-07")
    page.goto(f"{dashboard_stack.url}/nodes/{node.pk}/")
    _wait_live(page)
    assert page.locator("button.act").count() == 0
    screenshot(page, "dashboard-node-viewer")

    anon = chromium_browser.new_context()
    try:
        other = anon.new_page()
        other.goto(f"{dashboard_stack.url}/login/")
        outcome = other.evaluate("""() => new Promise(resolve => {
            const ws = new WebSocket(`ws://${location.host}/ws/fleet/`);
            ws.onopen = () => resolve('open');
            ws.onclose = ev => resolve('closed');
            setTimeout(() => resolve('timeout'), 5000);
        })""")
        assert outcome == "closed"
    finally:
        anon.close()
