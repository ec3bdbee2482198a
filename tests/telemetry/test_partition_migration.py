"""The migration from the unpartitioned raw tables keeps every row (and its id)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from apps.telemetry.models import ModuleSample, NodeSample, StageSample, TierSample
from apps.telemetry.store import partitions
from tests.telemetry.conftest import Fleet

BEFORE = [("telemetry", "0002_agent_contract_2_nullable_unknowns")]


def _latest() -> list[tuple[str, str]]:
    """Forward through the partitioning migration to the newest of every app: going back to
    telemetry 0002 unapplied the apps that depend on later telemetry (vectors, health, rollouts),
    and later tests need every table."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _migrate(target: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)


def _rows(table: str) -> list[tuple[Any, ...]]:
    with connection.cursor() as cur:
        cur.execute(f"SELECT * FROM {table} ORDER BY id")
        return list(cur.fetchall())


@pytest.mark.django_db(transaction=True)
def test_it_partitions_the_raw_tables_keeping_every_row(transactional_db: Any) -> None:
    fleet = Fleet()
    now = timezone.now()
    times = [now - dt.timedelta(hours=30, minutes=7), now - dt.timedelta(hours=2), now - dt.timedelta(minutes=1), now]
    _migrate(BEFORE)
    try:
        with connection.cursor() as cur:
            for i, t in enumerate(times):
                cur.execute("INSERT INTO telemetry_nodesample (time, node_id, cpu_util, mem_util, load1, in_flight,"
                            " threads) VALUES (%s, %s, %s, 0.3, 1.5, %s, 100)", [t, fleet.node_a.pk, i / 10, i])
                cur.execute("INSERT INTO telemetry_modulesample (time, module_id, node_id, util, temp_c, power_w,"
                            " link_width, link_width_expected, ecc_corrected, ecc_uncorrected, errors)"
                            " VALUES (%s, %s, %s, 0.5, %s, 9.5, 4, 4, %s, 0, 0)",
                            [t, fleet.mod_a[0].pk, fleet.node_a.pk, 50 + i, i])
                cur.execute("INSERT INTO telemetry_tiersample (time, tier_id, window_s, queue_depth, arrivals,"
                            " completions, input_tokens, output_tokens) VALUES (%s, %s, 10, %s, 5, 5, 0, 0)",
                            [t, fleet.tier.pk, i])
                cur.execute("INSERT INTO telemetry_stagesample (time, tier_id, stage, window_s, count, p50_ms,"
                            " p95_ms, p99_ms, max_ms) VALUES (%s, %s, 'intent', 10, %s, 1, 2, 3, 4)",
                            [t, fleet.tier.pk, i])
            # Ids with a gap, as a table that has seen deletes has.
            cur.execute("DELETE FROM telemetry_nodesample WHERE id = (SELECT min(id) + 1 FROM telemetry_nodesample)")
        tables = [m._meta.db_table for m in (NodeSample, ModuleSample, TierSample, StageSample)]
        before = {t: _rows(t) for t in tables}
        assert len(before["telemetry_nodesample"]) == 3 and len(before["telemetry_modulesample"]) == 4
    finally:
        _migrate(_latest())

    # Columns added by later migrations come last (stage samples: errors 0, node_id null).
    added = {"telemetry_stagesample": (0, None)}
    for table in tables:
        width = len(before[table][0])
        after = _rows(table)
        assert [r[:width] for r in after] == before[table], table
        assert {r[width:] for r in after} == {added.get(table, ())}, table
        with connection.cursor() as cur:
            cur.execute("SELECT relkind FROM pg_class WHERE relname = %s", [table])
            assert cur.fetchone()[0] == "p"  # partitioned
            names = {n for n, _lo, _hi in partitions.list_partitions(cur, table)}
        kept_times = [row[1] for row in before[table]]
        assert {partitions.partition_name(table, partitions.partition_start(t)) for t in kept_times} <= names
    # New rows get ids after the largest old one, through the ORM and through COPY alike.
    top = max(r[0] for r in before["telemetry_nodesample"])
    new = NodeSample.objects.create(time=now, node_id=fleet.node_a.pk, cpu_util=0.9, mem_util=0.1, load1=0,
                                    in_flight=0, threads=1)
    assert new.id > top and new.pk == (new.id, now)
    assert NodeSample.objects.filter(cpu_util=0.9).count() == 1
