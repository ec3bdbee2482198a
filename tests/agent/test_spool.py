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
