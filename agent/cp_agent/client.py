"""HTTP to the control plane API: telemetry batches and the command channel."""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent.cp_agent import __version__

log = logging.getLogger("cp_agent.client")

# The wire contract this agent speaks (docs/agent-protocol.md): sent as "contract" in every batch.
# With a latency log (--latency-log) its samples carry latency histograms: contract 3; without,
# it speaks 2, which every server since the field existed takes.
CONTRACT = 2
CONTRACT_LATENCY = 3
CONTRACT_HOLDERS = 4  # the newest this agent speaks: node samples may list the processes holding modules

TELEMETRY_PATH = "/api/v1/telemetry/"
COMMANDS_PATH = "/api/v1/agent/commands/"
SELF_PATH = "/api/v1/agent/self/"
VECTOR_PATH = "/api/v1/agent/vectors/{sha256}/"


class Outcome(enum.Enum):
    STORED = "stored"          # 202: written now
    DUPLICATE = "duplicate"    # 200 duplicate: already stored by an earlier send
    RETRY = "retry"            # API unreachable, 5xx, 429, 401: keep the batch, back off
    REJECTED = "rejected"      # 400/403/413...: the API will never take this batch


@dataclass
class SendResult:
    outcome: Outcome
    status: int | None = None
    detail: str = ""
    body: dict[str, Any] = field(default_factory=dict)


def _detail(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(data, dict) and "detail" in data:
        return str(data["detail"])[:500]
    return str(data)[:300]


def _names_contract(response: httpx.Response) -> bool:
    try:
        data = response.json()
    except ValueError:
        return False
    return isinstance(data, dict) and isinstance(data.get("errors"), dict) and "contract" in data["errors"]


class ApiClient:
    def __init__(self, api_url: str, token: str, *, timeout: float = 10.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.api_url = api_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.api_url,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            # who this agent is, on every request: its version and the newest contract it speaks
            headers={"Authorization": f"Agent {token}", "User-Agent": f"cp-agent/{__version__}",
                     "X-Agent-Contract": str(CONTRACT_HOLDERS)},
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request, sent again at once if the server closed a kept-alive connection as it went
        out (its idle timeout met our send interval: nothing was processed). Every request the agent
        makes is safe to repeat: batches carry their id, acks are idempotent, the rest are reads."""
        try:
            return self._http.request(method, path, **kwargs)
        except httpx.RemoteProtocolError as exc:
            log.debug("connection closed under the request (%s); sending it again", exc)
            return self._http.request(method, path, **kwargs)

    # -- telemetry ------------------------------------------------------------------------------
    def send_batch(self, payload: dict[str, Any]) -> SendResult:
        try:
            response = self._request("POST", TELEMETRY_PATH, json=payload)
        except httpx.HTTPError as exc:
            return SendResult(Outcome.RETRY, None, f"{type(exc).__name__}: {exc}")
        status = response.status_code
        if status in (200, 201, 202):
            try:
                body = response.json()
            except ValueError:
                body = {}
            duplicate = bool(isinstance(body, dict) and body.get("duplicate"))
            return SendResult(Outcome.DUPLICATE if duplicate else Outcome.STORED, status, "", body)
        if status >= 500 or status in (401, 408, 425, 429):
            return SendResult(Outcome.RETRY, status, _detail(response))
        if status == 400 and _names_contract(response):
            # A server that does not speak this contract yet (an upgrade under way): keep the batches.
            return SendResult(Outcome.RETRY, status, _detail(response))
        return SendResult(Outcome.REJECTED, status, _detail(response))

    def fetch_self(self) -> dict[str, Any]:
        """The node and its modules as the control plane knows them. Raises httpx.HTTPError."""
        response = self._request("GET", SELF_PATH)
        response.raise_for_status()
        data = response.json()
        return data if isinstance(data, dict) else {}

    def fetch_vector(self, sha256: str) -> dict[str, Any]:
        """A regression test vector by its hash: model (base64) and inputs. Raises httpx.HTTPError."""
        response = self._request("GET", VECTOR_PATH.format(sha256=sha256))
        response.raise_for_status()
        data = response.json()
        if not isinstance(data, dict) or "model" not in data:
            raise httpx.DecodingError(f"vector {sha256[:12]}: no model in the answer")
        return data

    # -- command channel --------------------------------------------------------------------------
    def fetch_commands(self, wait: float = 0) -> list[dict[str, Any]]:
        """Pending commands for this node (long-polls up to ``wait`` s). Raises httpx.HTTPError."""
        response = self._request("GET", COMMANDS_PATH, params={"wait": int(wait)},
                                  timeout=httpx.Timeout(wait + 10, connect=5.0))
        response.raise_for_status()
        data = response.json()
        if isinstance(data, dict):  # tolerate a paginated envelope
            data = data.get("results", [])
        return [c for c in data if isinstance(c, dict)]

    def ack_command(self, command_id: int, status: str, result: dict[str, Any]) -> None:
        """Acknowledge a command: in_progress (again and again while it runs), then succeeded, failed
        or unknown (idempotent on the API side). Raises httpx.HTTPError."""
        response = self._request("POST", f"{COMMANDS_PATH}{command_id}/ack/", json={"status": status, "result": result})
        response.raise_for_status()
