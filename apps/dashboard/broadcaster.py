"""The broadcaster: each tick, push a small fleet snapshot to the fleet group, and
events for what changed since the previous tick that nobody published: drain
progress (what a hold waits for changes as reports arrive and deadlines near) to
node.<id>, scale requests and autoscaler decisions to tier.<id>, new audit
records to the fleet group. Node and module state changes are published by the
lifecycle itself after commit (apps.operations.lifecycle), so they are not
diffed here. Every read goes through the apps' selectors.

Delivery is at-most-once; clients re-fetch the snapshot over REST after a
reconnect.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from django.db import close_old_connections, connection
from django.utils import timezone

from apps.audit import selectors as audit
from apps.common.events import FLEET_GROUP, EventType, node_group, send_now, tier_group
from apps.common.leases import Lease
from apps.dashboard import selectors
from apps.operations import selectors as operations

log = logging.getLogger(__name__)


class LeaseLost(Exception):
    """The broadcaster's lease ran out or passed to another process during a tick."""


@dataclass
class Broadcaster:
    """Holds what the previous tick saw. The first tick sets the baseline and pushes
    only the snapshot."""

    drains: dict[int, dict[str, Any]] = field(default_factory=dict)
    scale_max: int = 0
    scale_running: dict[int, str] = field(default_factory=dict)
    decision_max: int = 0
    audit_max: int = 0
    ticks: int = 0
    guard: Callable[[], bool] | None = None


    def forget(self) -> None:
        """Drop what earlier ticks saw: the next tick sets a new baseline and pushes only the snapshot."""
        for f in fields(self):
            if f.name == "guard":
                continue
            setattr(self, f.name, f.default_factory() if f.default is MISSING else f.default)  # type: ignore[misc,operator]

    def _push(self, event: str, data: dict[str, Any], groups: list[str], sent: list[tuple[str, str]]) -> None:
        if self.guard is not None and not self.guard():
            raise LeaseLost("the broadcaster lease was lost mid-tick")
        for group in groups:
            send_now(group, event, data)
            sent.append((group, event))

    def tick(self, *, by: str = "") -> list[tuple[str, str]]:
        """One pass: returns the (group, event type) pairs pushed. ``by``: the lease holder,
        named in the snapshot (which broadcaster sent a frame). With a ``guard``, each push first
        checks it (the lease still held) and the tick stops if not."""
        now = timezone.now()
        sent: list[tuple[str, str]] = []
        first = self.ticks == 0
        snapshot = selectors.live_snapshot(now=now)
        snapshot["seq"] = self.ticks
        if by:
            snapshot["by"] = by
        self._push(EventType.SNAPSHOT, snapshot, [FLEET_GROUP], sent)

        drains = operations.drain_progress(now=now, ids=list(self.drains))
        if not first:
            for pk, d in drains.items():
                seen = self.drains.get(pk)
                if seen is None or (seen["state"], seen["waiting_for"]) != (d["state"], d["waiting_for"]):
                    self._push(EventType.DRAIN_PROGRESS, d, [node_group(d["node"])], sent)
        self.drains = {pk: d for pk, d in drains.items() if d["state"] != "released"}

        if first:
            self.scale_max = operations.max_scale_request_id()
            self.decision_max = operations.max_decision_id()
            self.audit_max = audit.audit_max_id()
            self.scale_running = {s["id"]: s["state"] for s in operations.scale_request_briefs(
                since_id=self.scale_max, running_ids=operations.running_scale_request_ids())}
        else:
            for sr in operations.scale_request_briefs(since_id=self.scale_max, running_ids=list(self.scale_running)):
                if self.scale_running.get(sr["id"]) != sr["state"] or sr["id"] > self.scale_max:
                    self._push(EventType.SCALE_DECISION, sr, [tier_group(sr["tier_id"])], sent)
                self.scale_max = max(self.scale_max, sr["id"])
                if sr["running"]:
                    self.scale_running[sr["id"]] = sr["state"]
                else:
                    self.scale_running.pop(sr["id"], None)
            for dec in operations.decision_briefs(since_id=self.decision_max):
                self._push(EventType.AUTOSCALER_DECISION, dec, [tier_group(dec["tier_id"])], sent)
                self.decision_max = dec["id"]
            newest = audit.audit_max_id()  # quiet actions are skipped, not re-read
            for ev in audit.audit_tail(since_id=self.audit_max, upto_id=newest):
                self._push(EventType.AUDIT, ev, [FLEET_GROUP], sent)
            self.audit_max = newest
        self.ticks += 1
        return sent

    def run(self, *, interval: float = 1.0, ticks: int = 0, lease: Lease | None = None) -> None:
        """Tick every ``interval`` seconds (on the wall clock, not drifting) until stopped. With a
        lease, only while holding it: a standby checks again every interval (at most a third of
        the lease's time to live) and takes over when the holder stops renewing; a broadcaster
        that lost its lease (paused past it) stops pushing before its next tick."""
        next_at = time.monotonic()
        done = 0
        failures = 0
        failing_since = None
        leading = lease is None
        self.guard = lease.held if lease is not None else None
        while ticks <= 0 or done < ticks:
            close_old_connections()
            try:
                if lease is not None:  # fencing: act only while holding the lease
                    if not lease.acquire():
                        if leading:
                            log.warning("broadcaster %s lost its lease; standing by", lease.holder)
                        leading = False
                        time.sleep(min(interval, lease.ttl_s / 3))
                        next_at = time.monotonic()
                        continue
                    if not leading:
                        log.info("broadcaster %s holds the lease (fence %s)", lease.holder, lease.fence)
                        self.forget()  # a new leader starts from a baseline of its own
                        leading = True
                first = self.ticks == 0
                self.tick(by=lease.holder if lease is not None else "")
                if first:  # what changes from here on is pushed; what changed before is the baseline
                    log.info("broadcaster %s: baseline set, pushing changes", lease.holder if lease else "")
            except LeaseLost:
                log.warning("broadcaster %s lost its lease mid-tick; standing by", lease and lease.holder)
                leading = False
                continue
            except Exception as exc:  # one bad tick (database or Redis restart) must not end the broadcaster
                failures += 1
                failing_since = failing_since or timezone.now()
                log.exception("broadcast tick failed (%d in a row)", failures)
                _drop_connection()  # reconnect on the next tick, through the pool's check
                # The pages say so (their data stops, and they show why), if Redis is still there.
                first_line = (str(exc).strip().splitlines() or [""])[0]
                send_now(FLEET_GROUP, EventType.BROADCAST_HEALTH, {
                    "ok": False, "failures": failures, "since": failing_since.isoformat(),
                    "error": f"{type(exc).__name__}: {first_line}"[:200],
                })
            else:
                if failures:
                    send_now(FLEET_GROUP, EventType.BROADCAST_HEALTH, {"ok": True, "failures": 0})
                    log.info("broadcast ticks succeed again after %d failure(s)", failures)
                failures = 0
                failing_since = None
            done += 1
            next_at += interval
            if failures:  # back off while the engines are away: 1, 2, 4 ... at most 15 ticks
                next_at += interval * (min(15, 2 ** (failures - 1)) - 1)
            delay = next_at - time.monotonic()
            if delay < 0:
                next_at = time.monotonic()
                delay = 0
            time.sleep(delay)


def _drop_connection() -> None:
    try:
        connection.close()
    except Exception:  # already broken; Django forgets it either way
        connection.connection = None
