"""Choice classes: values, labels and colours in one place."""

from django.db import models


class TierKind(models.TextChoices):
    ACCESS_LOGIC = "access_logic", "Access & logic"
    HYBRID_INFERENCE = "hybrid_inference", "Hybrid inference"
    EXTERNAL_LARGE_MODEL = "external_large_model", "External large model"


class NodeState(models.TextChoices):
    STANDBY = "standby", "Standby"
    ACTIVE = "active", "Active"
    CORDONED = "cordoned", "Cordoned"
    DRAINING = "draining", "Draining"
    DRAINED = "drained", "Drained"
    MAINTENANCE = "maintenance", "Maintenance"
    UNREACHABLE = "unreachable", "Unreachable"
    FAILED = "failed", "Failed"
    RETIRED = "retired", "Retired"


# States in which a node serves (or finishes) requests: hard admission rules apply.
SERVING_STATES = frozenset({NodeState.ACTIVE, NodeState.CORDONED, NodeState.DRAINING})

NODE_STATE_COLOURS = {
    NodeState.STANDBY: "#8a94a6",
    NodeState.ACTIVE: "#2e9d5b",
    NodeState.CORDONED: "#d9a400",
    NodeState.DRAINING: "#e07b00",
    NodeState.DRAINED: "#b35c00",
    NodeState.MAINTENANCE: "#5b6ee1",
    NodeState.UNREACHABLE: "#c0392b",
    NodeState.FAILED: "#8e1b10",
    NodeState.RETIRED: "#444b57",
}


class ModuleState(models.TextChoices):
    HEALTHY = "healthy", "Healthy"
    DEGRADED = "degraded", "Degraded"
    QUARANTINED = "quarantined", "Quarantined"
    FAILED = "failed", "Failed"


MODULE_STATE_COLOURS = {
    ModuleState.HEALTHY: "#2e9d5b",
    ModuleState.DEGRADED: "#d9a400",
    ModuleState.QUARANTINED: "#e07b00",
    ModuleState.FAILED: "#c0392b",
}


class FormFactor(models.TextChoices):
    M2 = "m2", "M.2"
    MINI_PCIE = "mini_pcie", "Mini PCIe"
    SOM = "som", "SoM"


class NicKind(models.TextChoices):
    ROCE_V2 = "roce_v2", "RoCEv2"
    ETHERNET_100G = "ethernet_100g", "100 Gb Ethernet"
    ETHERNET_25G = "ethernet_25g", "25 Gb Ethernet"
    ETHERNET_10G = "ethernet_10g", "10 Gb Ethernet"


class CombinationState(models.TextChoices):
    CANDIDATE = "candidate", "Candidate"
    VALIDATING = "validating", "Validating"
    VALIDATED = "validated", "Validated"
    PINNED = "pinned", "Pinned"
    BLOCKED = "blocked", "Blocked"


COMBINATION_STATE_COLOURS = {
    CombinationState.CANDIDATE: "#8a94a6",
    CombinationState.VALIDATING: "#5b6ee1",
    CombinationState.VALIDATED: "#2e9d5b",
    CombinationState.PINNED: "#1f6f43",
    CombinationState.BLOCKED: "#c0392b",
}


class EndpointKind(models.TextChoices):
    GPU_CLUSTER = "gpu_cluster", "GPU cluster"
    CLOUD_API = "cloud_api", "Cloud model API"


class RuleCode(models.TextChoices):
    """Soft admission rules (DOMAIN.md); each can be made hard in the admin."""

    PCIE_LANES = "pcie_lanes", "Module PCIe lanes within the node's lanes"
    POWER_BUDGET = "power_budget", "Node power including modules within budget"
    CPU_CLOCK = "cpu_clock", "CPU clock on access & logic nodes"
    MODULE_TOPS = "module_tops", "Module INT8 TOPS in the hybrid tier"


class Enforcement(models.TextChoices):
    WARN = "warn", "Warn"
    REJECT = "reject", "Reject"


MAX_MODULES_PER_NODE = 4

# DESIGN.md's node state machine: the states each state may move to.
_ANY = {NodeState.UNREACHABLE, NodeState.FAILED, NodeState.RETIRED}
NODE_TRANSITIONS: dict[str, set[str]] = {
    NodeState.STANDBY: {NodeState.ACTIVE, NodeState.MAINTENANCE} | _ANY,
    NodeState.ACTIVE: {NodeState.CORDONED, NodeState.DRAINING} | _ANY,
    NodeState.CORDONED: {NodeState.ACTIVE, NodeState.DRAINING} | _ANY,
    NodeState.DRAINING: {NodeState.DRAINED, NodeState.ACTIVE, NodeState.CORDONED} | _ANY,
    NodeState.DRAINED: {NodeState.MAINTENANCE, NodeState.STANDBY, NodeState.ACTIVE} | _ANY,
    NodeState.MAINTENANCE: {NodeState.ACTIVE, NodeState.STANDBY} | _ANY,
    NodeState.UNREACHABLE: {NodeState.ACTIVE, NodeState.STANDBY, NodeState.MAINTENANCE} | _ANY,
    NodeState.FAILED: {NodeState.MAINTENANCE, NodeState.STANDBY} | _ANY,
    NodeState.RETIRED: set(),
}
