"""The web process under 100 rounds of every hostile body (telemetry on the agents' lean path and
a JSON API write): every answer a 4xx, and its resident memory grows by less than 50 MB."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from rest_framework.authtoken.models import Token

from apps.accounts.services import user_ensure
from apps.inventory.models import Node
from apps.telemetry.models import IngestBatch, NodeSample
from tests.inventory.test_api_nodes import node_body
from tests.live.stack import LiveStack
from tests.security.hostile import encode, spoiled
from tests.telemetry.conftest import Fleet, node_sample

ROUNDS = 100
LIMIT_MB = 50
pytestmark = pytest.mark.heavy


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def test_memory_stays_flat_under_hostile_bodies(live_stack: LiveStack) -> None:
    fleet = Fleet()
    admin, _ = user_ensure(username="mem-admin", password="pw-admin", role="admin")
    token, _ = Token.objects.get_or_create(user=admin)
    telemetry = encode({"batch_id": "hostile-0001", "contract": 2,
                        "node_samples": [node_sample("n-a", serials=["A-0", "A-1"])]})
    nodes = encode({"items": [node_body(hostname="n-r9-01", rack="rack-t", slot=9)]})
    requests = [
        *[("/api/v1/telemetry/", f"Agent {fleet.key_a}", name, body)
          for name, body in spoiled(telemetry, number_key="load1", int_key="threads", nest_key="modules",
                                    text=b'"n-a"')],
        *[("/api/v1/nodes/bulk/", f"Token {token.key}", name, body)
          for name, body in spoiled(nodes, number_key="cpu_clock_ghz", int_key="slot", nest_key="labels",
                                    text=b'"n-r9-01"')],
    ]
    web = live_stack.web()
    nodes_before = Node.objects.count()

    with httpx.Client(base_url=live_stack.url, timeout=30) as client:
        def round_() -> None:
            for url, auth, name, body in requests:
                r = client.post(url, content=body, headers={"Authorization": auth,
                                                            "Content-Type": "application/json"})
                assert 400 <= r.status_code < 500, (url, name, r.status_code, r.text[:300])

        start = rss_mb(web.pid)
        began = time.monotonic()
        round_()
        warm = rss_mb(web.pid)
        for _ in range(ROUNDS - 1):
            round_()
        end = rss_mb(web.pid)
        took = time.monotonic() - began

    print(f"\n{ROUNDS} rounds of {len(requests)} hostile bodies in {took:.1f} s: web RSS {start:.1f} MB before, "
          f"{warm:.1f} MB after the first round, {end:.1f} MB after the last (+{end - start:.1f} MB)")
    assert end - start < LIMIT_MB
    assert Node.objects.count() == nodes_before
    assert not IngestBatch.objects.exists() and not NodeSample.objects.exists()
