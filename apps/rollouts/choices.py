"""Choice classes of driver rollouts: values, labels and colours in one place."""

from django.db import models

from apps.common.choices import Badge, ColouredChoices


class RolloutState(ColouredChoices):
    PLANNED = "planned", Badge("Planned", "#5f6779")
    WAITING = "waiting", Badge("Waiting for its window", "#8a6d00")
    CANARY = "canary", Badge("Canary", "#4a5bd0")
    WAVES = "waves", Badge("Waves", "#4a5bd0")
    PAUSED = "paused", Badge("Paused", "#8a6d00")
    COMPLETED = "completed", Badge("Completed", "#1f7a45")
    ABORTED = "aborted", Badge("Aborted", "#444b57")
    ROLLING_BACK = "rolling_back", Badge("Rolling back", "#b35900")
    ROLLED_BACK = "rolled_back", Badge("Rolled back", "#b35c00")
    FAILED = "failed", Badge("Failed", "#c0392b")


ACTIVE_ROLLOUT_STATES = frozenset({RolloutState.PLANNED, RolloutState.WAITING, RolloutState.CANARY, RolloutState.WAVES,
                                   RolloutState.PAUSED, RolloutState.ROLLING_BACK})
FINAL_ROLLOUT_STATES = frozenset({RolloutState.COMPLETED, RolloutState.ABORTED, RolloutState.ROLLED_BACK,
                                  RolloutState.FAILED})



class OnFailure(models.TextChoices):
    ROLLBACK = "rollback", "Roll the upgraded nodes back"
    PAUSE = "pause", "Pause and wait for an operator"


class Step(ColouredChoices):
    """One node's step. Forward: pending → cordoning → draining → installing → validating →
    uncordoning → done; on failure: failed → rolling_back → rolled_back; skipped (with its reason)."""

    PENDING = "pending", Badge("Pending", "#5f6779")
    CORDONING = "cordoning", Badge("Cordoning", "#8a6d00")
    DRAINING = "draining", Badge("Draining", "#b35900")
    INSTALLING = "installing", Badge("Installing", "#4a5bd0")
    VALIDATING = "validating", Badge("Validating", "#4a5bd0")
    UNCORDONING = "uncordoning", Badge("Uncordoning", "#8a6d00")
    DONE = "done", Badge("Done", "#1f7a45")
    FAILED = "failed", Badge("Failed", "#c0392b")
    ROLLING_BACK = "rolling_back", Badge("Rolling back", "#b35900")
    ROLLED_BACK = "rolled_back", Badge("Rolled back", "#b35c00")
    SKIPPED = "skipped", Badge("Skipped", "#444b57")


IN_PROGRESS_STEPS = frozenset({Step.CORDONING, Step.DRAINING, Step.INSTALLING, Step.VALIDATING, Step.UNCORDONING})
FINAL_STEPS = frozenset({Step.DONE, Step.ROLLED_BACK, Step.SKIPPED})


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
