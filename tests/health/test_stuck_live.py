"""A stuck rollout step end to end on the live stack with real node agents: the tier's floor is raised
after the rollout was planned, so its canary's cordon waits for capacity; past twice the step's
expected duration (``ROLLOUT_STEP_EXPECTED_S``, a few seconds here) the health sweep opens a ``stuck``
finding naming the node's step, since when and what it waits for (the capacity guard's numbers);
when the floor comes down the step moves on and the finding resolves."""

from __future__ import annotations

from typing import Any

import pytest

from apps.health.choices import ACTIVE_FINDING_STATES, FindingState
from apps.health.models import Finding
from apps.health.stuck import STUCK
from apps.inventory.models import Tier
from apps.rollouts.models import RolloutNode
from tests.live.stack import LiveStack, api_client, wait_for
from tests.rollouts.conftest import RolloutFleet

pytestmark = [pytest.mark.live, pytest.mark.timeout(900)]

EXPECTED_S = "4"
TASKS: dict[str, float] = {"apps.rollouts.tasks.rollouts_advance": 1, "apps.health.tasks.health_sweep": 2,
                           "apps.operations.tasks.drains_advance": 1}


def _stuck_finding() -> Finding | None:
    return Finding.objects.filter(check_name=STUCK, state__in=ACTIVE_FINDING_STATES,
                                  subject_key__startswith="stuck:rollouts:").first()


def test_a_step_waiting_for_capacity_raises_a_stuck_finding_naming_what_it_waits_for(live_stack: LiveStack) -> None:
    fleet = RolloutFleet()
    nodes = [fleet.node(f"n-{i}") for i in range(3)]
    env = {"ROLLOUT_STEP_EXPECTED_S": EXPECTED_S}
    live_stack.web(env=env)
    fleet.simulated_agents(live_stack, nodes)
    api = api_client(live_stack)
    body = {"combination": fleet.candidate.pk, "module_type": fleet.mtype.pk, "suite": fleet.suite.pk,
            "canary": 1, "wave_size": 1, "bake_s": 0, "install_timeout_s": 120, "vectors_timeout_s": 180,
            "reason": "driver 2.4.0"}
    created = api.post("/api/v1/rollouts/", json=body)
    assert created.status_code == 201, created.text
    pk = created.json()["id"]
    # Planned with room for one node out; then the tier's floor is raised to every active node it has
    # (before any worker runs), so the canary's cordon waits for capacity.
    tier = nodes[0].tier
    Tier.objects.filter(pk=tier.pk).update(min_active_nodes=len(nodes))
    live_stack.worker(env=env)
    live_stack.beat(every=TASKS, only=list(TASKS), env=env)

    canary = wait_for(lambda: RolloutNode.objects.filter(rollout_id=pk, wave=0, step="cordoning",
                                                         waiting_for__contains="capacity").first(),
                      timeout=120, what="the canary's cordon to wait for capacity", interval=0.5)
    finding = wait_for(_stuck_finding, timeout=120, what="a stuck finding on the canary's step", interval=1.0)
    assert canary is not None and finding is not None
    ev: dict[str, Any] = finding.evidence
    assert finding.node_id == canary.node_id and finding.severity == "warning"
    assert ev["state"] == "cordoning" and ev["rollout"] == pk and ev["expected_s"] == int(EXPECTED_S)
    assert ev["stuck_s"] >= 2 * int(EXPECTED_S)  # opened past twice it (the evidence rounds to seconds)
    assert "waiting for capacity" in ev["waits_for"] and "floor" in ev["waits_for"], ev["waits_for"]
    assert f"rollout #{pk}: {canary.node.hostname}'s step has been cordoning" in finding.summary
    listed = api.get("/api/v1/health/findings/", params={"check": STUCK, "state": "open"}).json()["results"]
    assert [f["id"] for f in listed] == [finding.pk]

    Tier.objects.filter(pk=tier.pk).update(min_active_nodes=1)
    wait_for(lambda: RolloutNode.objects.filter(pk=canary.pk).exclude(step="cordoning").exists(), timeout=120,
             what="the canary's step to move on once the floor came down", interval=0.5)
    wait_for(lambda: Finding.objects.filter(pk=finding.pk, state=FindingState.RESOLVED).exists(), timeout=120,
             what="the stuck finding to resolve", interval=1.0)
