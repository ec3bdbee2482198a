"""Telemetry models, one module per group; every model keeps the telemetry app label and its table."""

from apps.telemetry.models.ingest import IngestBatch
from apps.telemetry.models.rollups import (
    EndpointRollup,
    ModuleRollup,
    NodeLatencyRollup,
    NodeRollup,
    RollupDue,
    StageNodeRollup,
    StageRollup,
    TierLatencyRollup,
    TierRollup,
    WindowSummary,
)
from apps.telemetry.models.samples import LatencySample, ModuleSample, NodeSample, StageSample, TierSample
from apps.telemetry.models.status import ModuleStatus, NodeHolders, NodeStatus, TierStatus

__all__ = [
    "EndpointRollup", "IngestBatch", "LatencySample", "ModuleRollup", "ModuleSample", "ModuleStatus",
    "NodeHolders", "NodeLatencyRollup", "NodeRollup", "NodeSample", "NodeStatus", "RollupDue", "StageNodeRollup",
    "StageRollup",
    "StageSample", "TierLatencyRollup", "TierRollup", "TierSample", "TierStatus", "WindowSummary",
]
