"""Racing actions on real PostgreSQL: identical ones have one effect, conflicting ones get 409."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from apps.agents.choices import CommandKind
from apps.agents.models import NodeCommand
from apps.audit.models import AuditEvent
from apps.inventory.choices import NodeState
from apps.operations.models import Drain, IdempotencyRecord, ScaleRequest

from .conftest import Fleet, state_of

pytestmark = pytest.mark.django_db(transaction=True)


def _race(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` at once, each in its own thread (own DB connection)."""
    barrier = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            barrier.wait()
            out[i] = calls[i]()
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out


def _post(client: APIClient, url: str, body: dict[str, Any], **headers: Any) -> Callable[[], Any]:
    return lambda: client.post(url, body, format="json", **headers)


def test_it_has_one_effect_for_identical_racing_drains(operator_api):  # type: ignore[no-untyped-def]
    node = Fleet().node("n-1")
    url = f"/api/v1/nodes/{node.pk}/drain/"
    responses = _race([_post(operator_api, url, {"reason": "rack move"}) for _ in range(4)])
    codes = sorted(r.status_code for r in responses)
    assert codes == [200, 200, 200, 202]
    assert Drain.objects.count() == 1
    assert AuditEvent.objects.filter(action="node.drain").count() == 1
    assert NodeCommand.objects.filter(kind="drain").count() == 1
    assert state_of(node) == NodeState.DRAINING


def test_it_replays_a_key_sent_twice_at_once(operator_api):  # type: ignore[no-untyped-def]
    node = Fleet().node("n-1")
    url = f"/api/v1/nodes/{node.pk}/cordon/"
    responses = _race([_post(operator_api, url, {"reason": "x"}, HTTP_IDEMPOTENCY_KEY="race-1") for _ in range(3)])
    assert {r.status_code for r in responses} == {200}
    assert all(r.json() == responses[0].json() for r in responses)
    assert sorted(r["Idempotent-Replayed"] for r in responses) == ["false", "true", "true"]
    assert Drain.objects.count() == 1 and IdempotencyRecord.objects.count() == 1


def test_it_gives_409_to_the_loser_of_conflicting_drains(operator_api, admin_api):  # type: ignore[no-untyped-def]
    node = Fleet().node("n-1")
    url = f"/api/v1/nodes/{node.pk}/drain/"
    responses = _race([_post(operator_api, url, {"reason": "operator work"}),
                       _post(admin_api, url, {"reason": "ECC", "owner": "health"})])
    codes = sorted(r.status_code for r in responses)
    assert codes == [202, 409]
    loser = next(r for r in responses if r.status_code == 409)
    assert "is held by" in loser.json()["detail"] and "cannot change or clear it" in loser.json()["detail"]
    assert Drain.objects.count() == 1


def test_it_scales_up_once_when_two_operators_ask_at_once(operator_api):  # type: ignore[no-untyped-def]
    fleet = Fleet()
    fleet.node("n-1")
    for i in range(4):
        fleet.node(f"s-{i}", state=NodeState.STANDBY, rack=i % 2)
    url = f"/api/v1/tiers/{fleet.tier.pk}/scale/"
    responses = _race([_post(operator_api, url, {"desired": 3}) for _ in range(3)])
    assert sorted(r.status_code for r in responses) == [200, 200, 202]
    assert ScaleRequest.objects.count() == 1
    assert sum(1 for n in fleet.nodes.values() if state_of(n) == NodeState.ACTIVE) == 3
    assert NodeCommand.objects.filter(kind=CommandKind.ACTIVATE).count() == 2


def test_it_gives_409_to_a_conflicting_scale_down_at_once(operator_api):  # type: ignore[no-untyped-def]
    fleet = Fleet()
    for i in range(4):
        fleet.node(f"n-{i}", rack=i % 2)
    url = f"/api/v1/tiers/{fleet.tier.pk}/scale/"
    responses = _race([_post(operator_api, url, {"desired": 2}), _post(operator_api, url, {"desired": 3})])
    assert sorted(r.status_code for r in responses) == [202, 409]
    winner = ScaleRequest.objects.get()
    loser = next(r for r in responses if r.status_code == 409)
    assert f"already scaling to {winner.desired}" in loser.json()["detail"]
    assert Drain.objects.count() == 4 - winner.desired
