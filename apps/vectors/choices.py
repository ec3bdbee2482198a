"""Choice classes of regression test vectors: values, labels and colours in one place."""

from django.db import models

from apps.common.choices import Badge, ColouredChoices


class SuiteState(models.TextChoices):
    DRAFT = "draft", "Draft"
    PUBLISHED = "published", "Published (immutable)"


class RunState(ColouredChoices):
    QUEUED = "queued", Badge("Queued", "#5f6779")
    RUNNING = "running", Badge("Running", "#4a5bd0")
    PASSED = "passed", Badge("Passed", "#1f7a45")
    FAILED = "failed", Badge("Failed", "#c0392b")
    ERROR = "error", Badge("Error", "#8e1b10")
    CANCELLED = "cancelled", Badge("Cancelled", "#444b57")


FINAL_RUN_STATES = frozenset({RunState.PASSED, RunState.FAILED, RunState.ERROR, RunState.CANCELLED})


class RunPurpose(models.TextChoices):
    MANUAL = "manual", "Started by an operator"
    VALIDATION = "validation", "Validation of a candidate combination on the gray pool"
    NIGHTLY = "nightly", "Nightly version-regression check"
    VERSIONS_CHANGED = "versions_changed", "Version-regression check after a module's versions changed"


class RunPhase(models.TextChoices):
    """Where a run is: installing the combination (validation only), executing the vectors,
    putting the gray nodes back on their previous versions (validation only), done."""

    INSTALL = "install", "Installing the combination"
    EXECUTE = "execute", "Running the vectors"
    RESTORE = "restore", "Restoring the previous versions"
    DONE = "done", "Done"


class TargetState(models.TextChoices):
    """One module's part in a run."""

    PENDING = "pending", "Pending"
    INSTALLING = "installing", "Installing the combination"
    SENT = "sent", "Vectors sent to the agent"
    DONE = "done", "Results stored"
    TIMED_OUT = "timed_out", "Timed out"
    ERROR = "error", "Error"


class Outcome(ColouredChoices):
    PASS = "pass", Badge("Pass", "#1f7a45")
    FAIL = "fail", Badge("Fail (ran; outside tolerance)", "#c0392b")
    UNSUPPORTED = "unsupported", Badge("Unsupported (the runtime refused the model)", "#8a6d00")
    ERROR = "error", Badge("Error (loaded, then failed at run time)", "#8e1b10")


