"""Every periodic schedule in one place.

``manage.py sync_schedules`` (run by ``make up`` and the demo seed) writes
these into django-celery-beat's tables, where operators can edit them in the
admin; an entry already present keeps its edited interval and enabled flag.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Schedule:
    name: str
    task: str
    every_seconds: int
    queue: str = "default"
    expires_seconds: int | None = None


SCHEDULES: list[Schedule] = []

# Telemetry (apps/telemetry/tasks.py): per-minute rollups, partitions ahead, retention.
SCHEDULES += [
    Schedule("telemetry: per-minute rollups", "apps.telemetry.tasks.telemetry_rollup", 60,
             queue="telemetry", expires_seconds=55),
    Schedule("telemetry: partitions ahead", "apps.telemetry.tasks.telemetry_partitions", 600,
             queue="telemetry", expires_seconds=540),
    Schedule("telemetry: retention", "apps.telemetry.tasks.telemetry_retention", 3600,
             queue="telemetry", expires_seconds=3000),
]

# Fleet operations (apps/operations/tasks.py): the drain controller, the heartbeat and the autoscaler.
SCHEDULES += [
    Schedule("operations: advance drains and scale requests", "apps.operations.tasks.drains_advance", 5,
             expires_seconds=5),
    Schedule("operations: node heartbeat (unreachable after NODE_HEARTBEAT_TIMEOUT_S)",
             "apps.operations.tasks.nodes_heartbeat", 5, expires_seconds=5),
    Schedule("operations: autoscaler", "apps.operations.tasks.autoscaler_run", 10, expires_seconds=10),
    Schedule("operations: retention", "apps.operations.tasks.operations_retention", 3600, expires_seconds=3000),
]

# Health (apps/health/tasks.py): the checks over the whole fleet; an overrunning sweep is skipped.
SCHEDULES += [
    Schedule("health: sweep the fleet's checks", "apps.health.tasks.health_sweep", 10, queue="health",
             expires_seconds=10),
]

# Regression test vectors (apps/vectors/tasks.py): the sweep collecting agents' answers and applying timeouts.
SCHEDULES += [
    Schedule("vectors: advance runs", "apps.vectors.tasks.vector_runs_advance", 5, queue="vectors",
             expires_seconds=5),
    Schedule("vectors: check modules whose versions changed", "apps.vectors.tasks.vectors_versions_changed", 60,
             queue="vectors", expires_seconds=55),
    Schedule("vectors: nightly version-regression check (pinned combinations, a sample of serving modules)",
             "apps.vectors.tasks.vectors_nightly", 86400, queue="vectors", expires_seconds=3600),
]

# Driver rollouts (apps/rollouts/tasks.py): the controller advancing every active rollout.
SCHEDULES += [
    Schedule("rollouts: advance rollouts", "apps.rollouts.tasks.rollouts_advance", 3, expires_seconds=3),
]
