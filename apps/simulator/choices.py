"""Choice classes of the simulator: the failure patterns it can inject (DOMAIN.md)."""

from django.db import models


class FaultKind(models.TextChoices):
    NOISY_NEIGHBOUR = "noisy_neighbour", "Noisy neighbour job (periodic latency spikes)"
    PCIE_DEGRADED = "pcie_degraded", "PCIe link trained at reduced width"
    ECC_RISING = "ecc_rising", "ECC errors rising"
    NODE_CRASH = "node_crash", "Node crash (samples stop)"
    RUNAWAY_PARSING = "runaway_parsing", "Runaway parsing before inference"
    BAD_COMBINATION = "bad_combination", "Driver/framework combination corrupting one INT8 operator"


# Faults that strike one node; bad_combination strikes every module on a combination.
NODE_FAULTS = frozenset({
    FaultKind.NOISY_NEIGHBOUR, FaultKind.PCIE_DEGRADED, FaultKind.ECC_RISING,
    FaultKind.NODE_CRASH, FaultKind.RUNAWAY_PARSING,
})

FAULT_DEFAULT_PARAMS: dict[str, dict[str, object]] = {
    FaultKind.NOISY_NEIGHBOUR: {"period_s": 120, "duration_s": 20, "steal": 0.35, "latency_factor": 6.0},
    FaultKind.PCIE_DEGRADED: {"slot": None, "width_factor": 0.5},
    FaultKind.ECC_RISING: {"corrected_per_min": 30, "uncorrected_after_s": 120},
    FaultKind.NODE_CRASH: {},
    FaultKind.RUNAWAY_PARSING: {"cpu_util": 0.98, "perception_factor": 25.0, "planning_factor": 10.0},
    FaultKind.BAD_COMBINATION: {"operator": "Gelu", "error": 0.08},
}
