"""Choice classes: values, labels and colours in one place."""

from django.db import models

from apps.common.choices import Badge, ColouredChoices


class TierKind(models.TextChoices):
    ACCESS_LOGIC = "access_logic", "Access & logic"
    HYBRID_INFERENCE = "hybrid_inference", "Hybrid inference"
    EXTERNAL_LARGE_MODEL = "external_large_model", "External large model"


class NodeState(ColouredChoices):
    STANDBY = "standby", Badge("Standby", "#5f6779")
    ACTIVE = "active", Badge("Active", "#1f7a45")
    CORDONED = "cordoned", Badge("Cordoned", "#d9a400")
    DRAINING = "draining", Badge("Draining", "#b35900")
    DRAINED = "drained", Badge("Drained", "#b35c00")
    MAINTENANCE = "maintenance", Badge("Maintenance", "#4a5bd0")
    UNREACHABLE = "unreachable", Badge("Unreachable", "#c0392b")
    FAILED = "failed", Badge("Failed", "#8e1b10")
    RETIRED = "retired", Badge("Retired", "#444b57")


# States in which a node serves (or finishes) requests: hard admission rules apply.
SERVING_STATES = frozenset({NodeState.ACTIVE, NodeState.CORDONED, NodeState.DRAINING})


class ModuleState(ColouredChoices):
    HEALTHY = "healthy", Badge("Healthy", "#1f7a45")
    DEGRADED = "degraded", Badge("Degraded", "#d9a400")
    QUARANTINED = "quarantined", Badge("Quarantined", "#b35900")
    FAILED = "failed", Badge("Failed", "#c0392b")


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


class CombinationState(ColouredChoices):
    CANDIDATE = "candidate", Badge("Candidate", "#5f6779")
    VALIDATING = "validating", Badge("Validating", "#4a5bd0")
    VALIDATED = "validated", Badge("Validated", "#1f7a45")
    PINNED = "pinned", Badge("Pinned", "#1f6f43")
    BLOCKED = "blocked", Badge("Blocked", "#c0392b")


class EndpointKind(models.TextChoices):
    GPU_CLUSTER = "gpu_cluster", "GPU cluster"
    CLOUD_API = "cloud_api", "Cloud model API"


class RuleCode(models.TextChoices):
    """Soft admission rules (docs/domain.md, "Node rules"); each can be made hard in the admin."""

    PCIE_LANES = "pcie_lanes", "Module PCIe lanes within the node's lanes"
    POWER_BUDGET = "power_budget", "Node power including modules within budget"
    CPU_CLOCK = "cpu_clock", "CPU clock on access & logic nodes"
    MODULE_TOPS = "module_tops", "Module INT8 TOPS in the hybrid tier"


class Enforcement(models.TextChoices):
    WARN = "warn", "Warn"
    REJECT = "reject", "Reject"


MAX_MODULES_PER_NODE = 4

# The operator actions on a node and on a module (as the pages and POST /api/v1/nodes/{id}/<action>/
# name them; "maintenance-leave" is /maintenance/leave/) and the states each one starts from. The
# lifecycle (apps/operations/lifecycle.py) refuses every other state with 409; the pages enable
# and the API lists (``allowed_actions``) exactly these. Who holds a node, and the tier's floor,
# can still refuse an action a state allows.
_N = NodeState
NODE_ACTIONS: dict[str, frozenset[NodeState]] = {
    "cordon": frozenset({_N.ACTIVE}),
    "drain": frozenset({_N.ACTIVE, _N.CORDONED}),
    "uncordon": frozenset({_N.CORDONED, _N.DRAINING, _N.DRAINED, _N.MAINTENANCE}),
    "maintenance": frozenset(set(_N) - {_N.MAINTENANCE, _N.RETIRED}),
    "maintenance-leave": frozenset({_N.MAINTENANCE}),
}
MODULE_ACTIONS: dict[str, frozenset[ModuleState]] = {
    "quarantine": frozenset({ModuleState.HEALTHY, ModuleState.DEGRADED}),
    "release": frozenset({ModuleState.QUARANTINED}),
}


def node_allowed_actions(state: str) -> list[str]:
    """The actions a node in ``state`` accepts, in the pages' order."""
    return [action for action, states in NODE_ACTIONS.items() if state in states]


def module_allowed_actions(state: str) -> list[str]:
    """The actions a module in ``state`` accepts."""
    return [action for action, states in MODULE_ACTIONS.items() if state in states]

# States belong to the node lifecycle (apps/operations/lifecycle.py, which holds the transition
# table); the inventory only sets where a new node or module starts.
NODE_INITIAL_STATES = (NodeState.STANDBY, NodeState.MAINTENANCE)
MODULE_INITIAL_STATES = (ModuleState.HEALTHY, ModuleState.DEGRADED, ModuleState.FAILED)
NODE_STATE_ACTIONS = ("change it with the node's actions: POST /api/v1/nodes/{id}/cordon/, /drain/, /uncordon/, "
                      "/maintenance/ or /maintenance/leave/, or scale its tier: POST /api/v1/tiers/{tier}/scale/")
MODULE_STATE_ACTIONS = "change it with POST /api/v1/modules/{id}/quarantine/ or /release/"
