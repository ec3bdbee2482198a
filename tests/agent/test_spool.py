from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent.cp_agent.backoff import Backoff
from agent.cp_agent.spool import Spool


def _sample(i: int) -> dict[str, object]:
    return {"node_samples": [{"time": f"2026-11-29T22:00:{i:02d}Z", "node": "n-1", "cpu_util": 0.1}]}


def test_it_keeps_batches_in_order_with_their_ids_across_a_restart(tmp_path: Path) -> None:
    spool = Spool(tmp_path, prefix="n-1")
    made = [spool.append(_sample(i)) for i in range(5)]
    assert len({b.batch_id for b in made}) == 5
    assert all(b.payload["batch_id"] == b.batch_id for b in made)

    reopened = Spool(tmp_path, prefix="n-1")  # the agent restarted
    pending = reopened.peek(10)
    assert [b.batch_id for b in pending] == [b.batch_id for b in made]
    reopened.remove(pending[0])
    later = reopened.append(_sample(9))
    assert later.batch_id not in {b.batch_id for b in made}, "a new batch reused an old id"
    assert [b.batch_id for b in reopened.peek(10)] == [b.batch_id for b in made[1:]] + [later.batch_id]


def test_it_drops_the_oldest_batches_over_its_bound_and_counts_them(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    spool = Spool(tmp_path, max_batches=3)
    with caplog.at_level(logging.WARNING, logger="cp_agent.spool"):
        made = [spool.append(_sample(i)) for i in range(5)]
    assert [b.batch_id for b in spool.peek(10)] == [b.batch_id for b in made[2:]]
    assert spool.dropped_batches == 2 and spool.dropped_samples == 2
    assert "dropped the oldest batch" in caplog.text


def test_it_backs_off_with_full_jitter_up_to_the_cap() -> None:
    backoff = Backoff(base=1.0, cap=8.0)
    delays = [backoff.next_delay() for _ in range(200)]
    assert all(0 <= d <= 8.0 for d in delays)
    assert max(delays[:1]) <= 1.0 and max(delays[3:]) > 4.0  # grows, then capped
    assert len({round(d, 6) for d in delays}) > 150  # jittered, not a fixed ladder
    backoff.reset()
    assert backoff.ceiling() == 1.0


def _node(i: int) -> dict[str, object]:
    return {"time": f"2026-11-29T22:00:{i:02d}Z", "node": "n-1", "cpu_util": 0.1}


def test_it_batches_samples_and_sends_only_sealed_batches(tmp_path: Path) -> None:
    spool = Spool(tmp_path, prefix="n-1")
    sealed = [spool.add_sample("node_samples", _node(i), per_batch=3, header={"contract": 2}) for i in range(7)]
    assert [b is not None for b in sealed] == [False, False, True, False, False, True, False]
    batches = spool.peek(10)
    assert [b.sample_count for b in batches] == [3, 3]  # the seventh sample waits in the open batch
    assert all(b.payload["contract"] == 2 and b.payload["batch_id"] == b.batch_id for b in batches)
    assert [s["time"] for s in batches[1].payload["node_samples"]] == [_node(i)["time"] for i in (3, 4, 5)]
    assert len(spool) == 3 and spool.pending_samples() == 7
    assert spool.seal_open(older_than=3600) is None  # not open that long
    last = spool.seal_open()
    assert last is not None and last.sample_count == 1
    assert [b.batch_id for b in spool.peek(10)] == [*(b.batch_id for b in batches), last.batch_id]


def test_it_seals_an_open_batch_left_by_a_crash_with_its_id(tmp_path: Path) -> None:
    spool = Spool(tmp_path, prefix="n-1")
    spool.add_sample("node_samples", _node(0), per_batch=5)
    spool.add_sample("node_samples", _node(1), per_batch=5)
    assert spool.peek(10) == []
    reopened = Spool(tmp_path, prefix="n-1")  # the agent died with a batch open
    (left,) = reopened.peek(10)
    assert left.sample_count == 2
    fresh = reopened.add_sample("node_samples", _node(2), per_batch=1)
    assert fresh is not None and fresh.batch_id != left.batch_id and fresh.sample_count == 1


def test_it_puts_one_send_interval_of_samples_in_a_batch_at_most_100(tmp_path: Path) -> None:
    from agent.cp_agent.backends import NoModules
    from agent.cp_agent.client import ApiClient
    from agent.cp_agent.inflight import NoInFlight
    from agent.cp_agent.runner import MAX_SAMPLES_PER_BATCH, Agent

    def per_batch(interval: float, send_interval: float) -> int:
        agent = Agent(client=ApiClient("http://127.0.0.1:9", "k"), node="n-1", spool=Spool(tmp_path / "s"),
                      backend=NoModules(), in_flight=NoInFlight(), interval=interval, send_interval=send_interval)
        agent.client.close()
        return agent.samples_per_batch

    assert MAX_SAMPLES_PER_BATCH == 100
    assert per_batch(1, 5) == 5 and per_batch(5, 5) == 1 and per_batch(0.5, 1) == 2
    assert per_batch(10, 5) == 1  # sending more often than sampling: every sample goes out at once
    assert per_batch(0.1, 60) == 100
