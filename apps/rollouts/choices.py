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

# Badge backgrounds under white 12 px text: each at least 4.5:1 (WCAG AA; tests/common/test_badge_colours.py).
ROLLOUT_STATE_COLOURS = {
    RolloutState.PLANNED: "#5f6779",
    RolloutState.CANARY: "#4a5bd0",
    RolloutState.WAVES: "#4a5bd0",
    RolloutState.PAUSED: "#8a6d00",
    RolloutState.COMPLETED: "#1f7a45",
    RolloutState.ABORTED: "#444b57",
    RolloutState.ROLLING_BACK: "#b35900",
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
    Step.PENDING: "#5f6779",
    Step.CORDONING: "#8a6d00",
    Step.DRAINING: "#b35900",
    Step.INSTALLING: "#4a5bd0",
    Step.VALIDATING: "#4a5bd0",
    Step.UNCORDONING: "#8a6d00",
    Step.DONE: "#1f7a45",
    Step.FAILED: "#c0392b",
    Step.ROLLING_BACK: "#b35900",
    Step.ROLLED_BACK: "#b35c00",
    Step.SKIPPED: "#444b57",
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
