"""Choice classes of fleet operations: values, labels and colours in one place."""

from django.db import models

from apps.common.choices import Badge, ColouredChoices


class Owner(models.TextChoices):
    """Who holds a cordon, drain or quarantine. One owner never clears another's."""

    OPERATOR = "operator", "Operator"
    HEALTH = "health", "Health checks"
    ROLLOUT = "rollout", "Rollout"
    AUTOSCALER = "autoscaler", "Autoscaler"


class DrainKind(models.TextChoices):
    CORDON = "cordon", "Cordon (no new work)"
    DRAIN = "drain", "Drain (cordon, then wait for zero in-flight)"


class DrainState(ColouredChoices):
    CORDONED = "cordoned", Badge("Cordoned", "#8a6d00")
    DRAINING = "draining", Badge("Draining", "#b35900")
    DRAINED = "drained", Badge("Drained", "#b35c00")
    RELEASED = "released", Badge("Released", "#5f6779")


ACTIVE_DRAIN_STATES = (DrainState.CORDONED, DrainState.DRAINING, DrainState.DRAINED)


class DeadlineAction(models.TextChoices):
    """What a drain does when its deadline passes with work still in flight."""

    ALERT = "alert", "Stay draining and alert"
    FORCE = "force", "Force: mark drained, cutting what is still in flight"


class AfterDrain(models.TextChoices):
    """Where the node goes once drained."""

    STAY = "stay", "Stay drained"
    MAINTENANCE = "maintenance", "Enter maintenance"
    STANDBY = "standby", "Return to standby (scale-down)"


class ScaleState(ColouredChoices):
    RUNNING = "running", Badge("Running", "#4a5bd0")
    COMPLETED = "completed", Badge("Completed", "#1f7a45")
    SUPERSEDED = "superseded", Badge("Superseded", "#5f6779")


class DecisionAction(models.TextChoices):
    NONE = "none", "No change"
    SCALE_UP = "scale_up", "Scale up"
    SCALE_DOWN = "scale_down", "Scale down"
    DRY_RUN = "dry_run", "Dry run (recorded only)"
    SKIPPED = "skipped", "Skipped"




class WindowActor(models.TextChoices):
    """What a change window governs (and a freeze holds to observe-only)."""

    ROLLOUTS = "rollouts", "Rollouts (starting a wave)"
    SCALE_DOWN = "scale_down", "Autoscaler scale-down"
    HEALTH_ACTIONS = "health_actions", "Health actions"
    VECTOR_RUNS = "vector_runs", "Vector runs on serving nodes"
