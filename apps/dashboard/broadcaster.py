"""The broadcaster: each tick, push a small fleet snapshot to the fleet group, and
events for what changed since the previous tick. Every socket is in the fleet
group, so fleet-wide news goes there once (node state, audit records) and the
rest only to the narrow group of the page that shows it (drain progress to
node.<id>; scale requests and autoscaler decisions to tier.<id>): no client gets
an event twice.

Changes are found by diffing committed state tick to tick, so every writer
(operations services, health checks, rollouts, the admin) is covered without
calling anything here. Delivery is at-most-once; clients re-fetch the snapshot
over REST after a reconnect.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from django.db import close_old_connections
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.dashboard import selectors
from apps.dashboard.choices import FLEET_GROUP, EventType, node_group, tier_group
from apps.dashboard.events import send_now
from apps.operations.choices import ScaleState
from apps.operations.models import AutoscalerDecision, ScaleRequest

log = logging.getLogger(__name__)


@dataclass
class Broadcaster:
    """Holds what the previous tick saw. The first tick sets the baseline and pushes
    only the snapshot."""

    nodes: dict[int, tuple[str, int, str]] | None = None
    drains: dict[int, dict[str, Any]] = field(default_factory=dict)
    scale_max: int = 0
    scale_running: dict[int, str] = field(default_factory=dict)
    decision_max: int = 0
    audit_max: int = 0
    ticks: int = 0

    def _push(self, event: str, data: dict[str, Any], groups: list[str], sent: list[tuple[str, str]]) -> None:
        for group in groups:
            send_now(group, event, data)
            sent.append((group, event))

    def tick(self) -> list[tuple[str, str]]:
        """One pass: returns the (group, event type) pairs pushed."""
        now = timezone.now()
        sent: list[tuple[str, str]] = []
        first = self.nodes is None
        snapshot = selectors.live_snapshot(now=now)
        snapshot["seq"] = self.ticks
        self._push(EventType.SNAPSHOT, snapshot, [FLEET_GROUP], sent)

        states = selectors.node_states()
        if not first and self.nodes is not None:
            for pk, (state, tier_id, host) in states.items():
                before = self.nodes.get(pk)
                if before is None or before[0] != state:
                    data = {"id": pk, "hostname": host, "tier_id": tier_id, "state": state,
                            "previous": before[0] if before else None, "time": now.isoformat()}
                    self._push(EventType.NODE_STATE, data, [FLEET_GROUP], sent)
        self.nodes = states

        drains = selectors.drain_progress(now=now, ids=list(self.drains))
        if not first:
            for pk, d in drains.items():
                seen = self.drains.get(pk)
                if seen is None or (seen["state"], seen["waiting_for"]) != (d["state"], d["waiting_for"]):
                    self._push(EventType.DRAIN_PROGRESS, d, [node_group(d["node"])], sent)
        self.drains = {pk: d for pk, d in drains.items() if d["state"] != "released"}

        if first:
            self.scale_max = selectors.max_id(ScaleRequest)
            self.decision_max = selectors.max_id(AutoscalerDecision)
            self.audit_max = selectors.max_id(AuditEvent)
            running = list(ScaleRequest.objects.filter(state=ScaleState.RUNNING).values_list("pk", flat=True))
            self.scale_running = {s["id"]: s["state"] for s in
                                  selectors.scale_requests(since_id=self.scale_max, running_ids=running)}
        else:
            for sr in selectors.scale_requests(since_id=self.scale_max, running_ids=list(self.scale_running)):
                if self.scale_running.get(sr["id"]) != sr["state"] or sr["id"] > self.scale_max:
                    self._push(EventType.SCALE_DECISION, sr, [tier_group(sr["tier_id"])], sent)
                self.scale_max = max(self.scale_max, sr["id"])
                if sr["running"]:
                    self.scale_running[sr["id"]] = sr["state"]
                else:
                    self.scale_running.pop(sr["id"], None)
            for dec in selectors.autoscaler_decisions(since_id=self.decision_max):
                self._push(EventType.AUTOSCALER_DECISION, dec, [tier_group(dec["tier_id"])], sent)
                self.decision_max = dec["id"]
            newest = selectors.max_id(AuditEvent)  # quiet actions are skipped, not re-read
            for ev in selectors.audit_events(since_id=self.audit_max, upto_id=newest):
                self._push(EventType.AUDIT, ev, [FLEET_GROUP], sent)
            self.audit_max = newest
        self.ticks += 1
        return sent

    def run(self, *, interval: float = 1.0, ticks: int = 0) -> None:
        """Tick every ``interval`` seconds (on the wall clock, not drifting) until stopped."""
        next_at = time.monotonic()
        done = 0
        while ticks <= 0 or done < ticks:
            close_old_connections()
            try:
                self.tick()
            except Exception:  # one bad tick (database restart) must not end the broadcaster
                log.exception("broadcast tick failed")
            done += 1
            next_at += interval
            delay = next_at - time.monotonic()
            if delay < 0:
                next_at = time.monotonic()
                delay = 0
            time.sleep(delay)
