"""Health's actions inside the remediation budget it shares with the other automated actors: its
(N+1)th hold after the autoscaler's N is held back, noted on its finding and on the tier's
``budget_held_back`` finding, and taken once the budget has room again."""

from __future__ import annotations

import datetime as dt

from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.health.choices import FindingState
from apps.health.models import Finding
from apps.health.services import check_update
from apps.operations import lifecycle
from apps.operations.choices import Owner
from apps.operations.models import BudgetHeldBack, Drain
from tests.health.conftest import HealthFleet, findings, sweeps


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_health_is_held_back_by_the_autoscalers_drain_and_acts_when_it_ends(
        hfleet: HealthFleet, viewer_user: User, viewer_api: APIClient) -> None:
    for i in range(10):
        hfleet.node(f"n-{i:02d}")
    hfleet.all_report(at=timezone.now() - dt.timedelta(minutes=2))
    hfleet.rollup()
    check_update(name="cpu_bound", policy="act", actor="admin")
    scaled = hfleet.nodes["n-05"]
    lifecycle.node_drain(node=scaled, owner=Owner.AUTOSCALER, reason="scale-down", actor="autoscaler")
    hfleet.sample(hfleet.nodes["n-01"], cpu=0.98, modules={"n-01-m0": {"util": 0.01}, "n-01-m1": {"util": 0.0}})
    sweeps(3)
    assert not Drain.objects.filter(owner=Owner.HEALTH).exists()
    [f] = findings("cpu_bound")
    assert f.action["result"] == "held_back"
    assert f.action["text"] == ("max_unavailable: automation already holds 1 of 10 serving nodes of Hybrid inference "
                                "(autoscaler scale-down 1; at most 1): would cordon node n-01")
    assert f.action["budget"]["held_by"] == {"scale_down": 1}
    [b] = findings("budget_held_back")
    assert b.state == FindingState.OPEN and b.evidence["actor"] == "Health actions"
    assert b.evidence["wanted"] == "cordon node n-01" and b.evidence["limit"] == "max_unavailable"
    assert b.summary.startswith("Health actions held back on Hybrid inference: cordon node n-01: max_unavailable")
    # the page and the API show it with its numbers as labelled values and its advice
    page = client_for(viewer_user).get("/health/").content.decode()
    assert f'data-finding="{b.pk}"' in page and "Held by automation on the tier" in page
    assert "already hold as much of the tier or the fleet as the remediation budget allows" in page
    body = viewer_api.get("/api/v1/health/findings/", {"check": "budget_held_back"}).json()
    [api] = body["results"]
    assert api["id"] == b.pk and api["evidence"]["held_by"] == {"scale_down": 1} and api["advice"]

    # the scale-down's drain ends: the next sweep cordons, the record is cleared, the finding resolves
    lifecycle.node_uncordon(node=scaled, owner=Owner.AUTOSCALER, reason="taken back", actor="autoscaler")
    hfleet.sample(hfleet.nodes["n-01"], cpu=0.98, modules={"n-01-m0": {"util": 0.01}, "n-01-m1": {"util": 0.0}})
    sweeps(1)
    f.refresh_from_db()
    assert f.action["result"] == "acted" and Drain.objects.get(owner=Owner.HEALTH, released_at__isnull=True).node \
        == hfleet.nodes["n-01"]
    assert not BudgetHeldBack.objects.exists()
    b.refresh_from_db()
    assert b.state == FindingState.RESOLVED
    assert Finding.objects.filter(check_name="budget_held_back", state=FindingState.OPEN).count() == 0
