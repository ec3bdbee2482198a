"""Choice classes of fleet operations: values, labels and colours in one place."""

from django.db import models


class Owner(models.TextChoices):
    """Who holds a cordon, drain or quarantine. One owner never clears another's."""

    OPERATOR = "operator", "Operator"
    HEALTH = "health", "Health checks"
    ROLLOUT = "rollout", "Rollout"
    AUTOSCALER = "autoscaler", "Autoscaler"


class DrainKind(models.TextChoices):
    CORDON = "cordon", "Cordon (no new work)"
    DRAIN = "drain", "Drain (cordon, then wait for zero in-flight)"


class DrainState(models.TextChoices):
    CORDONED = "cordoned", "Cordoned"
    DRAINING = "draining", "Draining"
    DRAINED = "drained", "Drained"
    RELEASED = "released", "Released"


ACTIVE_DRAIN_STATES = (DrainState.CORDONED, DrainState.DRAINING, DrainState.DRAINED)

DRAIN_STATE_COLOURS: dict[str, str] = {
    DrainState.CORDONED: "#8a6d00",
    DrainState.DRAINING: "#b35900",
    DrainState.DRAINED: "#b35c00",
    DrainState.RELEASED: "#5f6779",
}


class DeadlineAction(models.TextChoices):
    """What a drain does when its deadline passes with work still in flight."""

    ALERT = "alert", "Stay draining and alert"
    FORCE = "force", "Force: mark drained, cutting what is still in flight"


class AfterDrain(models.TextChoices):
    """Where the node goes once drained."""

    STAY = "stay", "Stay drained"
    MAINTENANCE = "maintenance", "Enter maintenance"
    STANDBY = "standby", "Return to standby (scale-down)"


class ScaleState(models.TextChoices):
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    SUPERSEDED = "superseded", "Superseded"


SCALE_STATE_COLOURS: dict[str, str] = {
    ScaleState.RUNNING: "#4a5bd0",
    ScaleState.COMPLETED: "#1f7a45",
    ScaleState.SUPERSEDED: "#5f6779",
}


class DecisionAction(models.TextChoices):
    NONE = "none", "No change"
    SCALE_UP = "scale_up", "Scale up"
    SCALE_DOWN = "scale_down", "Scale down"
    DRY_RUN = "dry_run", "Dry run (recorded only)"
    SKIPPED = "skipped", "Skipped"


