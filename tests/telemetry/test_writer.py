"""The writer process: a SIGKILL in the middle of a COPY loses nothing and stores
nothing twice; a database outage is waited out with backoff."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest
from django.db import connection, transaction
from django.db.models import Max, Min
from django.utils import timezone

from apps.agents.models import AgentToken
from apps.agents.services import identity_of
from apps.inventory.models import Module
from apps.telemetry.ingest.receive import telemetry_receive
from apps.telemetry.models import IngestBatch, ModuleSample, NodeSample, NodeStatus
from apps.telemetry.store import partitions
from apps.telemetry.store.appender import conninfo
from apps.telemetry.store.raw import telemetry_store_pending
from tests.live import stack as live
from tests.telemetry.conftest import Fleet, node_sample, stored

BASE_DIR = Path(__file__).resolve().parents[2]


def _buffer(fleet: Fleet, batches: int, samples: int) -> int:
    identity = identity_of(AgentToken.objects.get(node=fleet.node_a))
    now = timezone.now()
    for b in range(batches):
        body = {"batch_id": f"kill-{b:06d}", "node_samples": [
            node_sample("n-a", now - dt.timedelta(seconds=b * samples + i), ["A-0", "A-1"]) for i in range(samples)]}
        telemetry_receive(identity=identity, body=msgspec.json.encode(body), now=now)
    return batches * samples


def _writer(tmp_path: Path, name: str, batch: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": live.test_database_url(), "DB_POOL_MAX_SIZE": "0",
           "DB_CONN_MAX_AGE": "0", "DB_APPLICATION_NAME": name, "LOG_LEVEL": "WARNING"}
    log = (tmp_path / f"{name}.log").open("ab")
    try:
        return subprocess.Popen([sys.executable, "manage.py", "telemetry_writer", "--batch", str(batch)],
                                cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        log.close()


def _copy_waiting(name: str, writer: subprocess.Popen[bytes], log: Path) -> int:
    """Rows the writer's COPY of node samples has taken so far, once it waits for a lock (else 0)."""
    if writer.poll() is not None:  # not an assertion: wait_for would keep waiting
        raise RuntimeError(f"the writer exited with {writer.returncode}:\n{log.read_text()}")
    with connection.cursor() as cur:
        cur.execute("SELECT p.tuples_processed FROM pg_stat_activity a JOIN pg_stat_progress_copy p ON p.pid = a.pid"
                    " WHERE a.application_name = %s AND a.wait_event_type = 'Lock'"
                    " AND a.query LIKE 'COPY telemetry_nodesample %%'", [name])
        row = cur.fetchone()
    return int(row[0]) if row else 0


def _partitions_of(table: str) -> tuple[str, list[str]]:
    """Make the partitions of ``table`` the buffered batches need (so a writer makes none and goes
    straight to its COPY); returns the oldest one's name, and all their names."""
    span = IngestBatch.objects.filter(stored_at__isnull=True).aggregate(oldest=Min("min_time"), newest=Max("max_time"))
    starts = partitions.starts_between(span["oldest"], span["newest"])
    with transaction.atomic(), connection.cursor() as cur:
        partitions.create(cur, table, starts)
    return partitions.partition_name(table, starts[0]), [partitions.partition_name(table, s) for s in starts]


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_it_loses_nothing_when_the_writer_is_killed_mid_copy(transactional_db: Any, tmp_path: Path) -> None:
    fleet = Fleet()
    total = _buffer(fleet, batches=300, samples=100)  # 30,000 node and 60,000 module rows, one pass
    # The node samples go newest first, so the oldest hour's partition is the last the COPY reaches:
    # with its lock held elsewhere, the COPY stops there, half-way, until the lock goes.
    oldest, made = _partitions_of("telemetry_nodesample")
    assert len(made) > 1, made  # rows for other partitions come first
    name = f"cp-writer-kill-{os.getpid()}"
    with psycopg.connect(live.test_database_url(), application_name=f"{name}-lock") as lock:
        lock.execute(f'LOCK TABLE ONLY "{oldest}" IN SHARE MODE')
        writer = _writer(tmp_path, name, batch=300)
        try:
            copied = live.wait_for(lambda: _copy_waiting(name, writer, tmp_path / f"{name}.log"), timeout=60,
                                   what="the writer's COPY to wait for the oldest partition")
            assert 0 < copied < total, copied  # the kill lands mid-COPY: some rows in, not all
            os.killpg(writer.pid, signal.SIGKILL)
            writer.wait(10)
        finally:
            if writer.poll() is None:
                os.killpg(writer.pid, signal.SIGKILL)
            lock.rollback()  # its server process, still waiting, goes on and finds its client gone
    # Killed mid-COPY: its transaction is gone as a whole, every batch still waits in the buffer.
    def gone() -> bool:
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name])
            return bool(cur.fetchone()[0] == 0)

    live.wait_for(gone, timeout=30, what="the killed writer's server process to end")
    assert NodeSample.objects.count() == 0
    assert IngestBatch.objects.filter(stored_at__isnull=True).count() == 300

    again = _writer(tmp_path, name + "-2", batch=100)
    try:
        deadline = time.monotonic() + 90
        while IngestBatch.objects.filter(stored_at__isnull=True).exists():
            assert again.poll() is None, (tmp_path / f"{name}-2.log").read_text()
            assert time.monotonic() < deadline, "the second writer did not store the buffer"
            time.sleep(0.2)
    finally:
        again.send_signal(signal.SIGTERM)
        again.wait(20)
    assert NodeSample.objects.count() == total
    assert ModuleSample.objects.count() == 2 * total
    with connection.cursor() as cur:  # every sample once: no (node, time) twice
        cur.execute("SELECT count(*) FROM (SELECT 1 FROM telemetry_nodesample GROUP BY node_id, time"
                    " HAVING count(*) > 1) d")
        assert cur.fetchone()[0] == 0


@pytest.mark.django_db(transaction=True)
def test_it_shares_the_buffer_between_two_writers(transactional_db: Any) -> None:
    """Two passes at once (two writers) take different batches; each batch is stored once."""

    fleet = Fleet()
    total = _buffer(fleet, batches=40, samples=10)
    barrier = threading.Barrier(2)
    results: list[int] = []

    def one() -> None:
        try:
            barrier.wait()
            results.append(telemetry_store_pending(limit=25).batches)
        finally:
            connection.close()

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(results) == 40 or (sum(results) < 40 and stored() == 40 - sum(results))
    assert NodeSample.objects.count() == total


@pytest.mark.django_db(transaction=True)
def test_it_is_not_stopped_by_a_node_deleted_while_its_batch_waits(transactional_db: Any) -> None:
    """The node (and its modules) went away between accept and store: its raw rows are stored
    (orphans, as always), its latest state is not, and the batches behind it go on."""

    fleet = Fleet()
    _buffer(fleet, batches=2, samples=3)
    node_b = identity_of(AgentToken.objects.get(node=fleet.node_b))
    body = {"batch_id": "after-delete-1", "node_samples": [node_sample("n-b", timezone.now(), ["B-0"])]}
    telemetry_receive(identity=node_b, body=msgspec.json.encode(body))
    AgentToken.objects.filter(node=fleet.node_a).delete()
    Module.objects.filter(node=fleet.node_a).delete()
    fleet.node_a.delete()
    assert stored() == 3
    assert NodeSample.objects.count() == 7
    assert list(NodeStatus.objects.values_list("node__hostname", flat=True)) == ["n-b"]


@pytest.mark.django_db(transaction=True)
def test_two_writers_making_the_same_partition_at_once_both_go_through(transactional_db: Any) -> None:
    """`CREATE TABLE IF NOT EXISTS` is not safe against a concurrent twin: the second waits for the
    first's commit, then fails "already exists" (seen in CI when two writers stored the first batches
    of an hour at once). Here the first holds its new partition uncommitted until the second is seen
    waiting; the second then finds the partition made and goes on."""

    table = "telemetry_nodesample"
    start = partitions.partition_start(timezone.now() + dt.timedelta(days=40))  # nothing makes it ahead
    name = partitions.partition_name(table, start)
    errors: list[BaseException] = []
    made: dict[str, list[str]] = {}

    def second() -> None:
        try:
            with psycopg.connect(conninfo(), application_name="partition-twin",
                                 cursor_factory=psycopg.ClientCursor) as conn, conn.cursor() as cur:
                made["second"] = partitions.create(cur, table, [start])
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    with psycopg.connect(conninfo(), application_name="partition-first",
                         cursor_factory=psycopg.ClientCursor) as first, first.cursor() as cur:
        made["first"] = partitions.create(cur, table, [start])
        twin = threading.Thread(target=second)
        twin.start()
        with psycopg.connect(conninfo(), autocommit=True) as watch:
            live.wait_for(lambda: watch.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'partition-twin'"
                " AND wait_event_type = 'Lock'").fetchone()[0] == 1,  # type: ignore[index]
                timeout=30, what="the second creator waiting for the first")
        first.commit()
    twin.join(timeout=30)
    with connection.cursor() as dcur:
        names = [n for n, _lo, _hi in partitions.list_partitions(dcur, table)]
        dcur.execute(f'DROP TABLE IF EXISTS "{name}"')
    assert not twin.is_alive()
    assert errors == []
    assert made == {"first": [name], "second": []} and names.count(name) == 1
