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
    NodeState.STANDBY: "#5f6779",
    NodeState.ACTIVE: "#1f7a45",
    NodeState.CORDONED: "#d9a400",
    NodeState.DRAINING: "#b35900",
    NodeState.DRAINED: "#b35c00",
    NodeState.MAINTENANCE: "#4a5bd0",
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
    ModuleState.HEALTHY: "#1f7a45",
    ModuleState.DEGRADED: "#d9a400",
    ModuleState.QUARANTINED: "#b35900",
    ModuleState.FAILED: "#c0392b",
}


class ModuleCapability(models.TextChoices):
    """What a module type reports to its agent (the health checks that apply to its modules)."""

    ECC = "ecc", "ECC counters"
    LINK_WIDTH = "link_width", "PCIe link width"
    TEMPERATURE = "temperature", "Temperature"
    POWER = "power", "Power draw"
    ERRORS = "errors", "Error counter"


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
    CombinationState.CANDIDATE: "#5f6779",
    CombinationState.VALIDATING: "#4a5bd0",
    CombinationState.VALIDATED: "#1f7a45",
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

# States belong to the node lifecycle (apps/operations/lifecycle.py, which holds the transition
# table); the inventory only sets where a new node or module starts.
NODE_INITIAL_STATES = (NodeState.STANDBY, NodeState.MAINTENANCE)
MODULE_INITIAL_STATES = (ModuleState.HEALTHY, ModuleState.DEGRADED, ModuleState.FAILED)
NODE_STATE_ACTIONS = ("change it with the node's actions: POST /api/v1/nodes/{id}/cordon/, /drain/, /uncordon/, "
                      "/maintenance/ or /maintenance/leave/, or scale its tier: POST /api/v1/tiers/{tier}/scale/")
MODULE_STATE_ACTIONS = "change it with POST /api/v1/modules/{id}/quarantine/ or /release/"
