"""Change windows end to end on the live stack with real node agents (cp_agent subprocesses, their
simulated modules running the vectors on ONNX Runtime): a rollout created outside its window is
``waiting`` and says until when; when the window opens (its cron fires a minute or two ahead) the
beat's controller starts its canary, the agents install and validate, and the rollout completes
inside the window."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
import pytest
from django.utils import timezone

from apps.inventory.choices import NodeState
from apps.inventory.models import Module
from apps.operations.choices import WindowActor
from apps.operations.models import ChangeWindow
from apps.rollouts.models import RolloutNode
from tests.live.stack import LiveStack, api_client, wait_for
from tests.rollouts.conftest import RolloutFleet

pytestmark = [pytest.mark.heavy, pytest.mark.live, pytest.mark.timeout(1200)]

TASKS: dict[str, float] = {"apps.rollouts.tasks.rollouts_advance": 1, "apps.vectors.tasks.vector_runs_advance": 1,
                           "apps.operations.tasks.drains_advance": 1}


def _rollout(api: httpx.Client, pk: int) -> dict[str, Any]:
    return dict(api.get(f"/api/v1/rollouts/{pk}/").json())


def _when(api: httpx.Client, pk: int, ok: Any) -> dict[str, Any]:
    """The rollout when ``ok(rollout)`` holds, else an empty dict (for ``wait_for``)."""
    r = _rollout(api, pk)
    return r if ok(r) else {}


def test_a_rollout_created_outside_its_window_waits_then_starts_its_first_wave_when_it_opens(
        live_stack: LiveStack) -> None:
    fleet = RolloutFleet()
    nodes = [fleet.node(f"s-{i}", state=NodeState.STANDBY) for i in range(2)]
    # The window opens at the start of a minute one to two minutes from now, for half an hour.
    opens = (timezone.now() + dt.timedelta(minutes=2)).replace(second=0, microsecond=0)
    ChangeWindow.objects.create(name="the next minute", cron=f"{opens.minute} {opens.hour} * * *",
                                duration_minutes=30, time_zone="UTC", actors=[WindowActor.ROLLOUTS])
    live_stack.web()
    live_stack.worker()
    live_stack.beat(every=TASKS, only=list(TASKS))
    fleet.simulated_agents(live_stack, nodes)
    api = api_client(live_stack)
    body = {"combination": fleet.candidate.pk, "module_type": fleet.mtype.pk, "suite": fleet.suite.pk,
            "canary": 1, "wave_size": 1, "bake_s": 0, "install_timeout_s": 120, "vectors_timeout_s": 180,
            "reason": "driver 2.4.0 in tonight's window"}

    preview = api.post("/api/v1/rollouts/preview/", json=body)
    assert preview.status_code == 200, preview.text
    assert preview.json()["window"]["governing"] == ["the next minute"]
    created = api.post("/api/v1/rollouts/", json=body)
    assert created.status_code == 201, created.text
    pk = created.json()["id"]

    waiting = wait_for(lambda: _when(api, pk, lambda r: r["state"] == "waiting"), timeout=60,
                       what="the rollout to wait for its window", interval=0.5)
    assert dt.datetime.fromisoformat(waiting["waiting_until"]) == opens, waiting
    assert f"{opens:%Y-%m-%d %H:%M} UTC" in waiting["waiting_for"], waiting["waiting_for"]
    assert waiting["started_at"] is None
    assert set(RolloutNode.objects.filter(rollout_id=pk).values_list("step", flat=True)) == {"pending"}

    started = wait_for(lambda: _when(api, pk, lambda r: r["state"] != "waiting"),
                       timeout=(opens - timezone.now()).total_seconds() + 120,
                       what="the window to open and the canary to start", interval=1.0)
    assert started["state"] in ("canary", "waves", "completed"), started
    assert dt.datetime.fromisoformat(started["started_at"]) >= opens, (started["started_at"], opens)
    canary = RolloutNode.objects.get(rollout_id=pk, wave=0)
    done = wait_for(lambda: _when(api, pk, lambda r: r["state"] in ("completed", "rolled_back", "failed", "paused")),
                    timeout=600, what="the rollout to end inside its window", interval=2.0)
    assert done["state"] == "completed", (done["message"], done["waiting_for"])
    canary.refresh_from_db()
    assert canary.step == "done" and canary.started_at is not None and canary.started_at >= opens
    versions = set(Module.objects.filter(node__in=nodes).values_list("driver_version", flat=True))
    assert versions == {"2.4.0"}
