"""Two broadcasters and two beats, as production runs them: one of each acts, the other stands by
and takes over within two of the lease's time to live when the active one is killed, and an active
one paused past its lease (SIGSTOP) does not act when it wakes (SIGCONT)."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from channels.layers import get_channel_layer

from apps.common.events import FLEET_GROUP, EventType
from apps.common.leases import lease_holders
from tests.live.stack import LiveStack, Proc, wait_for

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

TTL = 4.0
ENV = {"LEASE_TTL_S": str(TTL)}


class Frames:
    """The fleet group's snapshots, as a websocket client receives them."""

    def __init__(self) -> None:
        # One event loop for every receive: the channel layer binds a channel's queue to its loop.
        self.loop = asyncio.new_event_loop()
        self.layer: Any = get_channel_layer()
        self.channel = self.loop.run_until_complete(self.layer.new_channel())
        self.loop.run_until_complete(self.layer.group_add(FLEET_GROUP, self.channel))

    def senders(self, seconds: float) -> list[str]:
        """Who sent each snapshot received over the next ``seconds``."""

        async def collect() -> list[str]:
            out: list[str] = []
            end = time.monotonic() + seconds
            while (left := end - time.monotonic()) > 0:
                try:
                    message = await asyncio.wait_for(self.layer.receive(self.channel), left)
                except TimeoutError:
                    break
                frame = json.loads(message["text"])
                if frame["type"] == EventType.SNAPSHOT:
                    out.append(frame["data"].get("by", ""))
            return out

        return self.loop.run_until_complete(collect())

    def first_sender(self, *, timeout: float, other_than: str = "") -> tuple[str, float]:
        """The first snapshot's sender (not ``other_than``) and when it arrived (monotonic)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for by in self.senders(0.5):
                if by and by != other_than:
                    return by, time.monotonic()
        raise AssertionError(f"no snapshot from a broadcaster other than {other_than!r} within {timeout:.0f} s")


@pytest.fixture
def frames(live_stack: LiveStack) -> Iterator[Frames]:
    listener = Frames()
    yield listener
    listener.loop.run_until_complete(listener.layer.group_discard(FLEET_GROUP, listener.channel))
    listener.loop.close()


def proc_of_holder(procs: list[Proc], holder: str) -> Proc:
    """The process a lease holder's name (``role@host:pid``) names."""
    pid = int(holder.rsplit(":", 1)[1])
    return next(p for p in procs if p.pid == pid)


def beat_sends(beat: Proc) -> int:
    """How many schedules a beat has fired so far, by its log."""
    return beat.log().count("Sending due task")


def test_one_broadcaster_pushes_and_a_standby_takes_over(live_stack: LiveStack, frames: Frames) -> None:
    procs = [live_stack.broadcaster(interval=0.2, env=ENV) for _ in range(2)]
    leader_name, _ = frames.first_sender(timeout=60)
    leader = proc_of_holder(procs, leader_name)
    # Only the leader pushes: every snapshot over two seconds is its own.
    assert set(frames.senders(2.0)) == {leader_name}
    assert next(h for h in lease_holders() if h.name == "broadcaster").holder == leader_name

    killed_at = time.monotonic()
    leader.kill()
    follower_name, resumed_at = frames.first_sender(timeout=60, other_than=leader_name)
    assert resumed_at - killed_at <= 2 * TTL, f"frames resumed {resumed_at - killed_at:.1f} s after the kill"

    # A new standby; then the leader is paused past its lease and woken.
    procs.append(live_stack.broadcaster(interval=0.2, env=ENV))
    follower = proc_of_holder(procs, follower_name)
    follower.signal(signal.SIGSTOP)
    third_name, _ = frames.first_sender(timeout=60, other_than=follower_name)
    since = len(follower.log())
    follower.signal(signal.SIGCONT)
    follower.wait_log("lost its lease", since=since, timeout=60)
    assert set(frames.senders(2.0)) == {third_name}, "the woken broadcaster pushed after losing its lease"


def test_one_beat_fires_and_a_standby_takes_over(live_stack: LiveStack) -> None:
    heartbeat = "apps.operations.tasks.nodes_heartbeat"
    beats = [live_stack.beat(every={heartbeat: 1}, only=[heartbeat], env=ENV) for _ in range(2)]
    active: Proc = wait_for(lambda: next((b for b in beats if beat_sends(b)), None), timeout=60,  # type: ignore[assignment]
                            what="a beat to fire")
    standby = next(b for b in beats if b is not active)
    # Only one fires: over a few periods the standby sends nothing while the active one goes on.
    before = beat_sends(active)
    wait_for(lambda: beat_sends(active) >= before + 3, timeout=60, what="three more fires")
    assert beat_sends(standby) == 0

    killed_at = time.monotonic()
    active.kill()
    wait_for(lambda: beat_sends(standby) > 0, timeout=60, what="the standby beat to fire")
    assert time.monotonic() - killed_at <= 2 * TTL + 2, "the standby fired more than two leases after the kill"

    # The new active beat is paused past its lease, a third takes over, and the woken one fires nothing.
    third = live_stack.beat(every={heartbeat: 1}, only=[heartbeat], env=ENV)
    standby.signal(signal.SIGSTOP)
    wait_for(lambda: beat_sends(third) > 0, timeout=60, what="the third beat to fire")
    paused_count = beat_sends(standby)
    standby.signal(signal.SIGCONT)
    going = beat_sends(third)
    wait_for(lambda: beat_sends(third) >= going + 3, timeout=60, what="the third beat to fire three more times")
    assert beat_sends(standby) == paused_count, "the woken beat fired after losing its lease"
