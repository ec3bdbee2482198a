"""Choice classes of the simulator: the failure patterns it can inject (docs/domain.md)."""

from django.db import models


class FaultKind(models.TextChoices):
    NOISY_NEIGHBOUR = "noisy_neighbour", "Noisy neighbour job (periodic latency spikes)"
    PCIE_DEGRADED = "pcie_degraded", "PCIe link trained at reduced width"
    ECC_RISING = "ecc_rising", "ECC errors rising"
    NODE_CRASH = "node_crash", "Node crash (samples stop)"
    RUNAWAY_PARSING = "runaway_parsing", "Runaway parsing before inference"
    BAD_COMBINATION = "bad_combination", "Driver/framework combination corrupting one INT8 operator"
    SILENT_CORRUPTION = "silent_corruption", "One module's float outputs off by less than the tolerance"
    ENDPOINT_SLOW = "endpoint_slow", "External endpoint slow (latency over its SLO)"
    ENDPOINT_ERRORS = "endpoint_errors", "External endpoint failing requests"
    ENDPOINT_QUOTA = "endpoint_quota", "External endpoint near its requests quota"


# Faults that strike one node; bad_combination strikes every module on a combination; the endpoint faults
# strike the external endpoint their params name (the first enabled one when none is named).
NODE_FAULTS = frozenset({
    FaultKind.NOISY_NEIGHBOUR, FaultKind.PCIE_DEGRADED, FaultKind.ECC_RISING,
    FaultKind.NODE_CRASH, FaultKind.RUNAWAY_PARSING, FaultKind.SILENT_CORRUPTION,
})
ENDPOINT_FAULTS = frozenset({FaultKind.ENDPOINT_SLOW, FaultKind.ENDPOINT_ERRORS, FaultKind.ENDPOINT_QUOTA})

FAULT_DEFAULT_PARAMS: dict[str, dict[str, object]] = {
    FaultKind.NOISY_NEIGHBOUR: {"period_s": 120, "duration_s": 20, "steal": 0.35, "latency_factor": 6.0},
    FaultKind.PCIE_DEGRADED: {"slot": None, "width_factor": 0.5},
    FaultKind.ECC_RISING: {"corrected_per_min": 30, "uncorrected_after_s": 120},
    FaultKind.NODE_CRASH: {},
    FaultKind.RUNAWAY_PARSING: {"cpu_util": 0.98, "perception_factor": 25.0, "planning_factor": 10.0},
    # The operator must be one the INT8 suites contain, so a bad combination fails exactly its vectors.
    FaultKind.BAD_COMBINATION: {"operator": "QLinearMatMul", "error": 0.08},
    # Float outputs of one module (slot None: the node's first) scaled by 1 + relative: inside rtol 1e-3.
    FaultKind.SILENT_CORRUPTION: {"slot": None, "relative": 1e-5},
    # An endpoint's median latency times latency_factor (900 ms → 3.6 s, p95 about 5.9 s).
    FaultKind.ENDPOINT_SLOW: {"endpoint": None, "latency_factor": 4.0},
    FaultKind.ENDPOINT_ERRORS: {"endpoint": None, "error_rate": 0.2},
    # Traffic raised to this share of the endpoint's requests-per-minute quota.
    FaultKind.ENDPOINT_QUOTA: {"endpoint": None, "use": 0.95},
}
