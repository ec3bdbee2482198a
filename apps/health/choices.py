"""Choice classes of the health checks: values, labels and colours in one place."""

from django.db import models

from apps.common.choices import Badge, ColouredChoices


class Status(models.TextChoices):
    """What one evaluation of a check found. ``unknown`` (no fresh telemetry, an error in the
    check) never counts as a pass."""

    PASS = "pass", "Pass"
    WARN = "warn", "Warn"
    FAIL = "fail", "Fail"
    UNKNOWN = "unknown", "Unknown"


class Severity(ColouredChoices):
    CRITICAL = "critical", Badge("Critical", "#c0392b")
    WARNING = "warning", Badge("Warning", "#8a6d00")
    INFO = "info", Badge("Info", "#4a5bd0")


SEVERITY_ORDER: dict[str, int] = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}


class FindingState(models.TextChoices):
    OPEN = "open", "Open"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    RESOLVED = "resolved", "Resolved"


ACTIVE_FINDING_STATES = (FindingState.OPEN, FindingState.ACKNOWLEDGED)


class Policy(models.TextChoices):
    """What health does about a check's finding."""

    OBSERVE = "observe", "Observe (record the finding only)"
    ALERT = "alert", "Alert (finding and notifications)"
    ACT = "act", "Act (cordon the node or quarantine the module, within the safety limits)"


class SubjectKind(models.TextChoices):
    NODE = "node", "Node"
    MODULE = "module", "Module"
    TIER = "tier", "Tier"
    ENDPOINT = "endpoint", "External endpoint"
    FLEET = "fleet", "Fleet"


class Evidence(models.TextChoices):
    """Where a check's numbers come from: it sets how fast the check can react."""

    LATEST = "latest", "Latest state (seconds old)"
    ROLLUPS = "rollups", "Minute rollups (up to two minutes old)"
    LATEST_AND_ROLLUPS = "latest+rollups", "Latest state against minute rollups"
    INVENTORY = "inventory", "Inventory (versions, pins)"
    ENDPOINT_MINUTES = "endpoint minutes", "The gateway's per-endpoint minutes (merged as its batches are stored)"
    OPERATIONS = "operations", "Fleet operations (drains and their deadlines)"
    AGENTS = "agents", "What each node's agent says it is (version, newest contract)"
