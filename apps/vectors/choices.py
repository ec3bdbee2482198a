"""Choice classes of regression test vectors: values, labels and colours in one place."""

from django.db import models


class SuiteState(models.TextChoices):
    DRAFT = "draft", "Draft"
    PUBLISHED = "published", "Published (immutable)"


class RunState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    PASSED = "passed", "Passed"
    FAILED = "failed", "Failed"
    ERROR = "error", "Error"
    CANCELLED = "cancelled", "Cancelled"


FINAL_RUN_STATES = frozenset({RunState.PASSED, RunState.FAILED, RunState.ERROR, RunState.CANCELLED})

RUN_STATE_COLOURS: dict[str, str] = {
    RunState.QUEUED: "#5f6779",
    RunState.RUNNING: "#4a5bd0",
    RunState.PASSED: "#1f7a45",
    RunState.FAILED: "#c0392b",
    RunState.ERROR: "#8e1b10",
    RunState.CANCELLED: "#444b57",
}


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


class Outcome(models.TextChoices):
    PASS = "pass", "Pass"
    FAIL = "fail", "Fail (ran; outside tolerance)"
    UNSUPPORTED = "unsupported", "Unsupported (the runtime refused the model)"
    ERROR = "error", "Error (loaded, then failed at run time)"


OUTCOME_COLOURS: dict[str, str] = {
    Outcome.PASS: "#1f7a45",
    Outcome.FAIL: "#c0392b",
    Outcome.UNSUPPORTED: "#8a6d00",
    Outcome.ERROR: "#8e1b10",
}
