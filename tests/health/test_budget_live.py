"""The remediation budget on a running simulated fleet (web, writer, a Celery worker on every queue, beat on
its real schedule, the simulator's agents reporting through the real endpoints): with the autoscaler's
scale-down drain holding all a ten-node tier allows, health's cordon of a CPU-bound node is held back
(its finding says so with the numbers, and the tier's ``budget_held_back`` finding opens); once the drain
is taken back, the budget lets health act on a later sweep (the cordon, or the capacity guard's refusal
when the simulated traffic needs the node) and the budget finding resolves."""

from __future__ import annotations

import pytest

from apps.health.choices import ACTIVE_FINDING_STATES, FindingState
from apps.health.models import Finding
from apps.health.services import check_update
from apps.inventory.choices import TierKind
from apps.operations import lifecycle
from apps.operations.choices import Owner
from apps.operations.models import Drain
from apps.simulator import services as simulator
from tests.agent.fleet import make_node
from tests.live.stack import LiveStack, wait_for

pytestmark = [pytest.mark.live, pytest.mark.heavy, pytest.mark.django_db(transaction=True), pytest.mark.timeout(1500)]


def _acted_on(check: str, hostname: str, result: str) -> Finding:
    """The active finding of ``check`` on ``hostname`` whose action came to ``result`` (``a|b``: either; fails
    until there is)."""
    active = Finding.objects.filter(check_name=check, node__hostname=hostname, state__in=ACTIVE_FINDING_STATES)
    found = active.filter(action__result__in=result.split("|")).first()
    assert found is not None, (f"no {check} finding on {hostname} with the action {result!r} yet: "
                               f"{[f.action for f in active]}")
    return found


def _budget_finding(tier_id: int, state: str) -> Finding:
    found = Finding.objects.filter(check_name="budget_held_back", tier_id=tier_id, state=state).first()
    assert found is not None, f"no {state} budget_held_back finding on tier {tier_id} yet"
    return found


def test_healths_cordon_waits_for_the_autoscalers_drain_in_the_same_budget(live_stack: LiveStack) -> None:
    for i in range(2):
        make_node(f"n-a-{i}", tier=TierKind.ACCESS_LOGIC, modules=0, slot=i + 1)
    hybrid = [make_node(f"n-h-{i}", modules=2, slot=10 + i) for i in range(10)]
    check_update(name="cpu_bound", policy="act", actor="admin")
    scaled, busy = hybrid[5], hybrid[0]
    # the autoscaler's scale-down holds one of the ten: 10 % of the tier, all it allows
    lifecycle.node_drain(node=scaled, owner=Owner.AUTOSCALER, reason="scale-down (test)", actor="autoscaler")
    live_stack.web()
    live_stack.simulator()
    live_stack.worker()
    live_stack.beat()
    simulator.fault_set(kind="runaway_parsing", node=busy, actor="test")

    held = wait_for(lambda: _acted_on("cpu_bound", busy.hostname, "held_back"), timeout=600,
                    what="the CPU-bound finding held back by the budget", interval=2.0)
    text = held.action["text"]
    assert text.startswith("max_unavailable: automation already holds 1 of "), held.action
    assert text.endswith(f"(autoscaler scale-down 1; at most 1): would cordon node {busy.hostname}"), held.action
    budget = wait_for(lambda: _budget_finding(busy.tier_id, FindingState.OPEN), timeout=120,
                      what="the tier's budget_held_back finding", interval=2.0)
    assert budget.evidence["actor"] == "Health actions" and budget.evidence["held_by"] == {"scale_down": 1}
    assert budget.evidence["wanted"] == f"cordon node {busy.hostname}"
    assert not Drain.objects.filter(node=busy, released_at__isnull=True).exists()

    lifecycle.node_uncordon(node=scaled, owner=Owner.AUTOSCALER, reason="taken back (test)", actor="autoscaler")
    after = wait_for(lambda: _acted_on("cpu_bound", busy.hostname, "acted|refused"), timeout=300,
                     what="health acting once the drain is taken back", interval=2.0)
    # the budget no longer holds it back: health cordons the node, unless the capacity guard (a limit of its
    # own: the simulated traffic's need) refuses, in the guard's words
    print(f"after the drain was taken back: {after.action['result']}: {after.action['text'][:200]}")
    if after.action["result"] == "acted":
        assert Drain.objects.get(node=busy, released_at__isnull=True).owner == Owner.HEALTH
    else:
        assert after.action["text"].startswith(f"cordon node {busy.hostname} refused: refused: "), after.action
        assert "below its floor" in after.action["text"], after.action
    resolved = wait_for(lambda: _budget_finding(busy.tier_id, FindingState.RESOLVED), timeout=120,
                        what="the budget finding resolved", interval=2.0)
    assert resolved.pk == budget.pk
