"""The diagnostics advisor: for a finding, its likely causes ranked, how to confirm each
(which chart or counter, with a link) and the remedy, from docs/domain.md's table
of known failure patterns. Plain data, read by the pages and the API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cause:
    cause: str
    confirm: str
    remedy: str
    # The lifecycle actions the remedy names (FINDING_ACTIONS), offered on the finding where it is read.
    actions: tuple[str, ...] = ()


# What a remedy can name, and what each acts on: a module (quarantine) or the finding's node.
FINDING_ACTIONS: dict[str, str] = {"quarantine": "module", "cordon": "node", "drain": "node"}


ADVICE: dict[str, list[Cause]] = {
    "heartbeat": [
        Cause("The node crashed, lost power or its network", "Node page: the last report time; the rack's other "
              "nodes (a rack-wide silence is power or the top-of-rack switch)", "Power-cycle or replace the node; "
              "the drain it held stays until it reports again"),
        Cause("The node agent stopped or its key expired", "The agent's service log on the node; Agent keys in the "
              "admin (revoked or expired?)", "Restart the agent; rotate its key"),
    ],
    "ecc": [
        Cause("A memory DIMM is failing: corrected errors rise, then uncorrected ones follow and crash long-running "
              "services or corrupt state", "Node page: the module's ECC corrected and uncorrected counters over "
              "the last minutes", "Drain the node, replace the DIMM; ECC memory only (non-ECC memory "
              "crashes long-running services)", ("drain",)),
        Cause("The module overheats, which raises the error rate", "Node page: the module's temperature beside "
              "its ECC counters", "Check the node's cooling and fans"),
    ],
    "link_width": [
        Cause("The PCIe lane budget is exceeded: the modules' lanes add up to more than the board gives its slots, "
              "so some train at reduced width and run slower than their twins", "Node page: link width reported "
              "below expected; the node's lanes used against its PCIe lanes", "Rebalance modules across nodes, "
              "check the lane allocation"),
        Cause("A module is badly seated or its slot degraded", "Reseat the module and look whether the width "
              "returns; swap slots with a twin", "Reseat or replace the module or riser",
              ("quarantine",)),
    ],
    "temperature": [
        Cause("Cooling: a failed fan, a blocked inlet, a hot aisle", "Node page: the module temperatures against "
              "their twins in the same rack", "Cordon the node and fix the airflow; the module throttles above "
              "its limit", ("cordon",)),
        Cause("Sustained full load on a module that is not rated for it", "Node page: module utilisation beside "
              "temperature", "Spread the load, lower the batch window"),
    ],
    "power": [
        Cause("The module draws more than its type is rated for (failing VRM, wrong firmware)", "Node page: module "
              "power against the type's rated watts", "Quarantine and replace the module; check firmware",
              ("quarantine",)),
        Cause("The node exceeds its power budget, so the rack cannot be filled", "Racks page: the rack's draw "
              "against its budget", "Move a module to another node"),
    ],
    "module_errors": [
        Cause("Driver and runtime versions mismatched (CUDA/driver errors after an upgrade)", "Combinations page: "
              "the module's versions against the pinned combination", "Lock version combinations; roll back "
              "the upgrade"),
        Cause("Failing hardware", "Node page: the module's error counter and its twins'", "Quarantine and replace "
              "the module", ("quarantine",)),
    ],
    "drain_deadline": [
        Cause("Requests in flight do not finish: long agent tasks (tens to hundreds of rounds), or a stuck "
              "request", "Node page: in-flight requests over time; Operations: what the drain waits for",
              "Wait and extend the deadline, or drain again with deadline_action force after telling the users"),
        Cause("The agent reports no in-flight figure, so the drain cannot see zero", "Node page: in flight shows "
              "unknown", "Fix the agent's in-flight source (--in-flight-from)"),
    ],
    "cpu_bound": [
        Cause("Requests stuck before inference, e.g. regex backtracking on long input", "Profile the agent service "
              "(py-spy); tier page: stage latency, perception and planning dominate", "A streaming parser and an "
              "input length limit (seen: 95 % → 20 % CPU)"),
        Cause("A serial main loop: one core at 100 %", "Per-thread CPU on the node (top -H)", "Split the loop"),
    ],
    "noisy_neighbour": [
        Cause("A backup, cron or log-rotation job on the same node steals CPU", "Node page: the CPU peaks recur "
              "every few minutes; correlate them with the node's scheduled jobs", "Pin the agent service; move "
              "the jobs to isolated cores"),
        Cause("GC pauses or lock contention (latency jitter > 100 ms)", "GC logs of the agent service",
              "Tune the GC; async I/O instead of threads"),
    ],
    "low_util_queue": [
        Cause("Agent logic is the bottleneck (CPU-bound), not the accelerators", "Tier page: module utilisation "
              "under 30 % while the queue grows; a CPU profile of the access nodes", "Optimise the framework code, "
              "move logic off the hot path"),
        Cause("Batches too small", "The batch-size metric", "Widen the batch window (max_wait_ms 50–100 for "
              "throughput)"),
    ],
    "agent_contract": [
        Cause("The node's agent is an older build: it speaks an older wire contract than the server (accepted, "
              "but it cannot send what the newer contract adds, e.g. latency histograms)", "Nodes list: the "
              "Agent column; `cpctl get nodes -o wide`", "Upgrade cp-agent on the node (pip install of the agent "
              "folder) and restart it; its next request reports the new version"),
    ],
    "version_drift": [
        Cause("The module missed a rollout or was installed by hand: 'array problems are usually one version off'",
              "Combinations page: the module's driver and framework against the type's pin", "Roll the pinned "
              "combination out to it; canary first with the regression test vectors"),
    ],
    "stage_latency": [
        Cause("A stage's p95 is over its target for the tier", "Tier page: stage latency chart; which stage grew",
              "Follow the stage: perception/planning → CPU-bound nodes; intent/generation → module load or "
              "link width; tool_call → the tools' endpoints"),
        Cause("Too few active nodes for the traffic", "Tier page: queue depth and active nodes", "Scale the tier "
              "up (the autoscaler's policy)"),
    ],
    "vector_regression": [
        Cause("The module's driver/framework combination is not bit-compatible: one INT8 operator loses precision "
              "(array problems are usually one version off)", "The regression run named in the evidence: its "
              "failing cases, the operator and the worst error; the combination's runs on /vectors/",
              "Roll the module back to the last pinned combination; block the combination if its twins fail too"),
        Cause("The module itself computes wrong (silent data corruption): its outputs differ from twins on the "
              "same combination", "The run's fingerprint: is this module the only one whose outputs differ?",
              "Quarantine the module and replace it", ("quarantine",)),
    ],
    "endpoint_latency": [
        Cause("The endpoint is saturated: more requests or longer prompts than its GPUs serve within the SLO "
              "(queueing at the provider)", "The finding's evidence: p95 per minute against the SLO, beside its "
              "requests/min; the tier page's external generation latency", "Spill over to another endpoint of the "
              "tier or back to the hybrid tier's medium models; ask the provider for capacity"),
        Cause("A degraded provider: a region or a GPU pool slow for everyone", "The provider's status page; the "
              "same p95 at a quiet hour", "Route to another endpoint or region until it recovers"),
    ],
    "endpoint_errors": [
        Cause("The provider is failing requests (5xx, timeouts) or refusing them for rate (429)",
              "The finding's evidence: errors and requests per window; the gateway's log of the endpoint's status "
              "codes", "Spill over to another endpoint; retry with backoff; on 429s see the quota headroom"),
        Cause("A credential or a model name changed on the endpoint (401/404 on every request)",
              "The gateway's log: the same status on every request since a time", "Fix the endpoint's key or "
              "model in the inventory and the gateway"),
    ],
    "endpoint_quota": [
        Cause("Traffic to the endpoint is approaching its requests- or tokens-per-minute quota: once it is used "
              "up the provider refuses requests (429)", "The finding's evidence: requests/min and tokens/min "
              "against the quota, per minute, and which one binds; the tier page's arrival rate",
              "Spill over to another endpoint before the quota runs out, or ask the provider for a quota raise "
              "(and record the new quota on the endpoint)"),
        Cause("Longer prompts or outputs: tokens per request grew, so the tokens quota binds first",
              "Tokens/min against requests/min in the evidence", "Cap the output length; move short requests to "
              "the hybrid tier"),
    ],
    "checker": [
        Cause("A health check raised an error: its subjects are unknown, not healthy", "The worker log around the "
              "finding's time (the exception is in the evidence)", "Fix the check or its parameters; until then "
              "watch these subjects by hand"),
    ],
    "stuck": [
        Cause("It waits on something that will not come: capacity the guard will not give up, another owner's hold, "
              "an agent that took a command and went quiet", "The finding's \"waits for\": the capacity guard's "
              "numbers, the holder, the agent's last answer; the node's page and the agent's log",
              "Give it what it waits for (capacity, the holder's release), or abort or pause what owns it and "
              "take the node out by hand"),
        Cause("The controller that moves it stopped (a worker or the scheduler down)", "The worker and beat "
              "processes, and whether other rollouts or runs move", "Restart the worker or beat; the state moves on "
              "from where it is"),
    ],
    "budget_held_back": [
        Cause("Automated actors (health's actions, the autoscaler's scale-downs, nightly and versions-changed "
              "vector runs) already hold as much of the tier or the fleet as the remediation budget allows, or "
              "started as many holds in the last hour: the next one waits", "The finding's evidence: what each "
              "actor holds and started against the limit reached; the tier's drains and quarantines by health or "
              "the autoscaler, and its running vector runs", "Usually nothing: it clears as holds end (a drain "
              "completes, a run finishes, health releases a node it fixed). If it stays, fix what health holds, or "
              "raise HEALTH_MAX_UNAVAILABLE, HEALTH_FLEET_MAX_UNAVAILABLE or HEALTH_ACTIONS_PER_HOUR"),
        Cause("Many findings want action at once on the tier (a storm): the budget is what keeps automation from "
              "taking the tier out", "Health's findings on the tier with action held back; the breaker",
              "Find the common cause (the breaker names the most recent change) before raising any limit"),
    ],
    "breaker": [
        Cause("Many nodes failing the same check at once is a software or settings change far more often than "
              "hardware", "The audit log: the most recent change named in the finding, and the time it happened",
              "Roll the change back or fix the check's parameters; health takes no action on the tier until "
              "fewer nodes fail"),
    ],
}


def advice(check_name: str, *, node_id: int | None = None, tier_id: int | None = None) -> list[dict[str, Any]]:
    """The ranked causes of a finding of ``check_name`` with how to confirm and the remedy, and where to look:
    the node's page, else the tier's (an endpoint's finding), else /health/."""
    link = f"/nodes/{node_id}/" if node_id else f"/tiers/{tier_id}/" if tier_id else "/health/"
    return [{"rank": i + 1, "cause": c.cause, "confirm": c.confirm, "remedy": c.remedy, "link": link}
            for i, c in enumerate(ADVICE.get(check_name, []))]


def remedy_actions(check_name: str) -> list[str]:
    """The lifecycle actions the remedies of ``check_name`` name, first cause first, each once."""
    out: list[str] = []
    for c in ADVICE.get(check_name, []):
        out += [a for a in c.actions if a not in out]
    return out
