"""The controllers: periodic passes that turn what the fleet reports into
lifecycle actions. Each item is advanced in its own transaction through
``apps.operations.lifecycle`` (the only writer of node state), so a worker
killed half-way leaves everything consistent and the next pass goes on; an item
another worker holds right now is skipped.

- drains: a drain completes on a report, newer than its start, with zero
  requests in flight; an unknown count (an agent that cannot read it) is not
  zero, so such a drain waits for its deadline; at the deadline it stays and
  alerts, or is forced, as the drain says; resume-after times release holds;
- the heartbeat: a node silent for NODE_HEARTBEAT_TIMEOUT_S becomes
  unreachable, and returns to its state when it reports again.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.inventory.choices import NodeState
from apps.inventory.models import Node
from apps.operations import lifecycle, selectors
from apps.operations.choices import ACTIVE_DRAIN_STATES, DeadlineAction, DrainState, ScaleState
from apps.operations.models import Drain, ScaleRequest
from apps.operations.scaling import scale_advance

logger = logging.getLogger(__name__)


def drain_advance(*, drain_id: int, now: dt.datetime | None = None) -> str:
    """One step of one drain; safe to run twice and from many workers. Returns what happened, in words."""
    now = now or timezone.now()
    node_id = Drain.objects.filter(pk=drain_id).values_list("node_id", flat=True).first()
    if node_id is None:
        return "skipped"
    with transaction.atomic():
        # Lock order everywhere: node, then its drain. A node another worker or an
        # operator holds right now is skipped; the next pass comes in seconds.
        node = (Node.objects.select_for_update(skip_locked=True, of=("self",)).select_related("tier", "rack")
                .filter(pk=node_id).first())
        if node is None:
            return "busy"
        drain = Drain.objects.select_for_update(of=("self",)).select_related("scale_request").filter(
            pk=drain_id).first()
        if drain is None or not drain.is_active:
            return "skipped"
        if drain.resume_after is not None and drain.resume_after <= now:
            lifecycle.drain_resume(drain=drain, node=node)
            return "resumed"
        if drain.state != DrainState.DRAINING:
            return "holding"
        if node.state != NodeState.DRAINING:
            return f"node is {node.state}"
        status = selectors.node_report(node_id=node.pk)
        fresh = status is not None and status.time >= drain.started_at
        in_flight = status.in_flight if status is not None else None
        if fresh and in_flight == 0:
            # A process still holding a module is work in flight too (the agent's --holders-from list):
            # drained only once its newest list since the drain started is empty. Read only at zero in
            # flight (and at a forced end): the other passes of a busy drain need not.
            held = selectors.drain_holders(drain)
            if held is None or (held[1] and not held[0]):
                lifecycle.drain_complete(drain=drain, node=node, forced=False, in_flight=0, now=now)
                return "drained"
        if drain.deadline is not None and drain.deadline <= now:
            if drain.deadline_action == DeadlineAction.FORCE:
                held = selectors.drain_holders(drain)
                lifecycle.drain_complete(drain=drain, node=node, forced=True, in_flight=in_flight, now=now,
                                         holders=held[0] if held is not None else [])
                return "forced"
            if drain.alerted_at is None:
                lifecycle.drain_deadline_alert(drain=drain, node=node, now=now,
                                               waiting_for=selectors.drain_waiting_for(drain, now=now))
                return "alerted"
        return "waiting"


def drains_advance(*, now: dt.datetime | None = None) -> dict[str, int]:
    """Advance every active drain and every running scale request (the periodic task)."""
    counts: dict[str, int] = {}
    ids = list(Drain.objects.filter(Q(state=DrainState.DRAINING)
                                    | Q(state__in=ACTIVE_DRAIN_STATES, resume_after__isnull=False))
               .order_by("pk").values_list("pk", flat=True))
    for pk in ids:
        outcome = drain_advance(drain_id=pk, now=now)
        counts[outcome] = counts.get(outcome, 0) + 1
    for sr_id in ScaleRequest.objects.filter(state=ScaleState.RUNNING).values_list("pk", flat=True):
        scale_advance(scale_request_id=sr_id)
    return counts


def heartbeat_timeout_s() -> float:
    return float(getattr(settings, "NODE_HEARTBEAT_TIMEOUT_S", 30))


def nodes_heartbeat(*, now: dt.datetime | None = None) -> dict[str, list[int]]:
    """Mark nodes silent for the heartbeat timeout unreachable, and bring back those reporting again.
    Two set-based reads, then one transaction per node that changes."""
    now = now or timezone.now()
    timeout = heartbeat_timeout_s()
    cutoff = now - dt.timedelta(seconds=timeout)
    lost = [pk for pk in selectors.heartbeat_candidates(cutoff=cutoff, watched=lifecycle.HEARTBEAT_STATES)
            if lifecycle.node_mark_unreachable(node_id=pk, cutoff=cutoff, timeout_s=timeout, now=now)]
    back = [pk for pk in selectors.reachable_again(since=cutoff)
            if lifecycle.node_mark_reachable(node_id=pk, since=cutoff)]
    if lost or back:
        logger.info("heartbeat: %d node(s) unreachable, %d back", len(lost), len(back))
    return {"unreachable": lost, "reachable": back}
