"""Choice classes of driver rollouts: values, labels and colours in one place."""

from django.db import models


class RolloutState(models.TextChoices):
    PLANNED = "planned", "Planned"
    CANARY = "canary", "Canary"
    WAVES = "waves", "Waves"
    PAUSED = "paused", "Paused"
    COMPLETED = "completed", "Completed"
    ABORTED = "aborted", "Aborted"
    ROLLING_BACK = "rolling_back", "Rolling back"
    ROLLED_BACK = "rolled_back", "Rolled back"
    FAILED = "failed", "Failed"


ACTIVE_ROLLOUT_STATES = frozenset({RolloutState.PLANNED, RolloutState.CANARY, RolloutState.WAVES,
                                   RolloutState.PAUSED, RolloutState.ROLLING_BACK})
FINAL_ROLLOUT_STATES = frozenset({RolloutState.COMPLETED, RolloutState.ABORTED, RolloutState.ROLLED_BACK,
                                  RolloutState.FAILED})

ROLLOUT_STATE_COLOURS = {
    RolloutState.PLANNED: "#8a94a6",
    RolloutState.CANARY: "#5b6ee1",
    RolloutState.WAVES: "#5b6ee1",
    RolloutState.PAUSED: "#d9a400",
    RolloutState.COMPLETED: "#2e9d5b",
    RolloutState.ABORTED: "#8a94a6",
    RolloutState.ROLLING_BACK: "#e07b00",
    RolloutState.ROLLED_BACK: "#b35c00",
    RolloutState.FAILED: "#c0392b",
}


class OnFailure(models.TextChoices):
    ROLLBACK = "rollback", "Roll the upgraded nodes back"
    PAUSE = "pause", "Pause and wait for an operator"


class Step(models.TextChoices):
    """One node's step. Forward: pending → cordoning → draining → installing → validating →
    uncordoning → done; on failure: failed → rolling_back → rolled_back; skipped (with its reason)."""

    PENDING = "pending", "Pending"
    CORDONING = "cordoning", "Cordoning"
    DRAINING = "draining", "Draining"
    INSTALLING = "installing", "Installing"
    VALIDATING = "validating", "Validating"
    UNCORDONING = "uncordoning", "Uncordoning"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    ROLLING_BACK = "rolling_back", "Rolling back"
    ROLLED_BACK = "rolled_back", "Rolled back"
    SKIPPED = "skipped", "Skipped"


IN_PROGRESS_STEPS = frozenset({Step.CORDONING, Step.DRAINING, Step.INSTALLING, Step.VALIDATING, Step.UNCORDONING})
FINAL_STEPS = frozenset({Step.DONE, Step.ROLLED_BACK, Step.SKIPPED})

STEP_COLOURS = {
    Step.PENDING: "#8a94a6",
    Step.CORDONING: "#d9a400",
    Step.DRAINING: "#e07b00",
    Step.INSTALLING: "#5b6ee1",
    Step.VALIDATING: "#5b6ee1",
    Step.UNCORDONING: "#d9a400",
    Step.DONE: "#2e9d5b",
    Step.FAILED: "#c0392b",
    Step.ROLLING_BACK: "#e07b00",
    Step.ROLLED_BACK: "#b35c00",
    Step.SKIPPED: "#8a94a6",
}


class RollbackPhase(models.TextChoices):
    """Where a node's rollback is: take it out of service, put its last-known-good versions back, return it."""

    NONE = "", "—"
    HOLD = "hold", "Taking the node out of service"
    INSTALL = "install", "Installing the last-known-good versions"
    RETURN = "return", "Returning the node to service"


class FailureKind(models.TextChoices):
    """Why a node failed: its versions (a failed vector gate) or the node itself (unreachable, install
    hook timeout, drain deadline). Both count toward the circuit breaker; only the first fails the gate."""

    NONE = "", "—"
    VERSIONS = "versions", "The versions (vectors failed)"
    NODE = "node", "The node (unreachable, install timeout, drain deadline)"
