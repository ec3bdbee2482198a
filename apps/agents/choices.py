"""Choice classes of the agents app: who an agent is, what it can be told, how a command stands, and
where a joining node's enrolment is."""

from django.db import models

from apps.common.choices import Badge, ColouredChoices


class AgentKind(models.TextChoices):
    NODE = "node", "Node agent"
    GATEWAY = "gateway", "Gateway"


class CommandKind(models.TextChoices):
    """Every kind of command the control plane sends to a node agent, declared once, with the args
    it sends. The channel accepts any kind (an agent answers one it does not know "unknown"); these
    are the ones the control plane itself sends. Agents (and the simulator) stop taking work on
    cordon, drain, standby and maintenance, and take it again on uncordon and resume."""

    CORDON = "cordon", "Cordon: take no new work ({drain, owner})"
    DRAIN = "drain", "Drain: take no new work, finish in-flight ({drain, owner, deadline})"
    UNCORDON = "uncordon", "Uncordon: take work again ({drain})"
    ACTIVATE = "resume", "Resume: a standby node activated by a scale-up takes work ({scale_request})"
    STANDBY = "standby", "Standby: out of service, ready ({drain} or {})"
    MAINTENANCE = "maintenance", "Maintenance: out of service ({drain} or {})"
    QUARANTINE_MODULE = "quarantine_module", "Quarantine a module ({serial, quarantine})"
    RELEASE_MODULE = "release_module", "Release a quarantined module ({serial, quarantine})"
    INSTALL_VERSIONS = "install_versions", ("Install driver and framework versions on modules "
                                            "({driver, framework, module_type, modules, restore, rollout | run})")
    RUN_VECTORS = "run_vectors", "Run regression test vectors on a module ({run, module, slot, suite, vectors})"
    PING = "ping", "Ping: answer succeeded ({})"


class CommandState(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    IN_PROGRESS = "in_progress", "In progress on the agent"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    UNKNOWN = "unknown", "Unknown to the agent"
    EXPIRED = "expired", "Expired"


# How long an agent is expected to take over a command once it has it (delivered, or acked in_progress);
# past twice this, the command is stuck (apps/health/stuck.py). Installs and vector runs take minutes; the
# rest is a state change on the host. A drain's own deadline is judged by its drain (drain_deadline).
COMMAND_EXPECTED_S: dict[str, float] = {CommandKind.INSTALL_VERSIONS: 900, CommandKind.RUN_VECTORS: 900}
COMMAND_EXPECTED_DEFAULT_S = 120.0

# States an agent may report in an ack, and the states that are final.
FINAL_ACK_STATES = (CommandState.SUCCEEDED, CommandState.FAILED, CommandState.UNKNOWN)
ACK_STATES = (CommandState.IN_PROGRESS, *FINAL_ACK_STATES)
FINAL_COMMAND_STATES = frozenset({*FINAL_ACK_STATES, CommandState.EXPIRED})


class EnrolmentState(ColouredChoices):
    """A node agent's request to join: staged ``pending`` until an admin (or the bootstrap token's
    auto-approve policy) approves it, which creates the node, or rejects it."""

    PENDING = "pending", Badge("Pending", "#4a5bd0")
    APPROVED = "approved", Badge("Approved", "#1f7a45")
    REJECTED = "rejected", Badge("Rejected", "#c0392b")
