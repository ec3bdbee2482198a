"""The versioned wire contract with node agents (docs/agent-protocol.md).

A telemetry batch says which version it speaks in ``contract``; a batch without
it is version 1 (agents from before the field existed). The server accepts
every version in ``VERSIONS`` and refuses any other with a 400 that lists
them. A change to the contract bumps ``CURRENT`` and keeps the earlier
versions accepted.

- 1: every node and module field is a number.
- 2: ``in_flight`` and the module metrics may be null: the agent does not know
  (no in-flight source, a read that failed, a series the exporter lacks).
  Null is stored as null and treated as unknown, never as zero (which fields:
  each metric's ``nullable_since`` in ``apps/telemetry/metrics.py``). Agents may
  acknowledge a command ``in_progress`` while it runs.
- 3: a tier sample may carry ``endpoints``: per-endpoint figures of the tier's
  external endpoints over the sample's window (requests, errors, tokens,
  latency p95). Optional: a version 3 tier sample without them is what it was.
  A node sample may carry ``latency``: per stage, a log-bucket histogram of the
  latencies of the requests the node served since its previous sample
  (``apps/telemetry/sketch.py``), which the rollups merge exactly into node, tier
  and fleet percentiles.
- 4: a node sample may carry ``holders``: the processes holding the node's modules (pid, name,
  module serial), as the agent's ``--holders-from`` hook lists them. A drain is not drained while
  the node's newest list names one; an empty list says none holds a module. Optional: an agent that
  does not look sends no list and its drains end on the in-flight count alone.
"""

from __future__ import annotations

from typing import Any

VERSIONS: tuple[int, ...] = (1, 2, 3, 4)
CURRENT = VERSIONS[-1]
# An agent says which agent it is on every request: ``User-Agent: cp-agent/VERSION`` and the newest
# contract version it speaks in ``X-Agent-Contract``. One whose newest is older than CURRENT is an
# old agent: still accepted, but the health check ``agent_contract`` names it (an upgrade is due).
CONTRACT_HEADER = "X-Agent-Contract"
# Since which version a tier sample may carry per-endpoint figures.
ENDPOINTS_SINCE = 3
# Since which version a node sample may carry latency histograms.
LATENCY_SINCE = 3
# Since which version a node sample may carry the processes holding its modules, and at most how many.
HOLDERS_SINCE = 4
MAX_HOLDERS = 256


class UnknownContract(ValueError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.versions = VERSIONS


def spoken() -> str:
    return ", ".join(str(v) for v in VERSIONS)


def contract_version(payload: dict[str, Any]) -> int:
    """The batch's contract version (1 when absent). Raises UnknownContract."""
    value = payload.get("contract")
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int):
        raise UnknownContract(f"must be a whole number: a contract version this server speaks ({spoken()})")
    if value not in VERSIONS:
        raise UnknownContract(f"version {value} is not one this server speaks: it speaks {spoken()}")
    return value

