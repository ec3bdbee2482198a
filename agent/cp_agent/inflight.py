"""Requests in flight on this node, read from the serving process.

``--in-flight-from`` says where, and must be said (there is no default: an
agent that silently reported 0 would let every drain finish at once):

- ``prometheus:URL#METRIC[,METRIC…]``: scrape the serving process's Prometheus
  text endpoint and sum the named metrics over all their label sets (Triton's
  ``nv_inference_pending_request_count``; vLLM's ``vllm:num_requests_running``
  plus ``vllm:num_requests_waiting``).
- ``command:CMD``: run ``CMD`` (through ``/bin/sh -c``) and read the integer it
  prints.
- ``none``: this node has no serving process the agent can ask.

A source answers an integer, or ``None`` when it does not know (``none``, or a
read that failed: endpoint down, a named metric absent, unparsable output).
The agent reports ``None`` as ``in_flight: null``; the control plane treats it
as unknown, never as zero (a drain then waits for its deadline).
"""

from __future__ import annotations

import logging
import math
import subprocess
from typing import Protocol

import httpx

from agent.cp_agent import prom
from agent.cp_agent.once import Once

log = logging.getLogger("cp_agent.inflight")

SPEC_HELP = "prometheus:URL#METRIC[,METRIC...] | command:CMD | none"


class ReadFailed(Exception):
    """A command source's read failed; the message says why (logged once by the reader)."""


def command_output(command: str, *, timeout: float) -> str:
    """What ``command`` prints, run through ``/bin/sh -c``. Raises ReadFailed: no answer within
    ``timeout``, it could not start, or it exited non-zero (with the end of its stderr)."""
    try:
        done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        raise ReadFailed(f"no answer within {timeout:g} s") from None
    except OSError as exc:
        raise ReadFailed(str(exc)) from None
    if done.returncode != 0:
        raise ReadFailed(f"exit code {done.returncode}: {done.stderr.strip()[-200:]}")
    return done.stdout


class InFlightSource(Protocol):
    description: str

    def read(self) -> int | None: ...

    def close(self) -> None: ...


class NoInFlight:
    """The operator said there is nothing to ask: always unknown."""

    description = "none (in_flight reported as null: drains wait for their deadline)"

    def read(self) -> int | None:
        return None

    def close(self) -> None:
        pass


class _Reader:
    """Shared failure bookkeeping: a failure is logged once per episode, recovery once."""

    description = ""

    def __init__(self) -> None:
        self._once = Once(log)

    def _failed(self, why: str) -> None:
        self._once.say("failing", logging.WARNING, "in-flight read from %s failed: %s; reporting in_flight null "
                       "(unknown) until it recovers", self.description, why)

    def _ok(self, value: int) -> int:
        if self._once.clear("failing"):
            log.warning("in-flight read from %s works again (%d in flight)", self.description, value)
        return value


class PrometheusInFlight(_Reader):
    def __init__(self, url: str, metrics: list[str], *, timeout: float = 2.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__()
        if not metrics:
            raise ValueError("name at least one metric after '#'")
        self.url = url
        self.metrics = metrics
        self.description = f"{url} ({' + '.join(metrics)})"
        self._http = httpx.Client(timeout=httpx.Timeout(timeout), transport=transport)

    def read(self) -> int | None:
        try:
            exposition = prom.scrape(self._http, self.url)
        except (httpx.HTTPError, ValueError) as exc:
            self._failed(f"{type(exc).__name__}: {exc}")
            return None
        missing = [m for m in self.metrics if not exposition.knows(m)]
        if missing:
            # A name the endpoint does not have is a typo or another server: unknown, not zero.
            self._failed(f"the endpoint has no metric named {', '.join(missing)}")
            return None
        total = sum(s.value for m in self.metrics for s in exposition.get(m))
        if not math.isfinite(total) or total < 0:
            self._failed(f"the metrics sum to {total}, not a count")
            return None
        return self._ok(int(round(total)))

    def close(self) -> None:
        self._http.close()


class CommandInFlight(_Reader):
    def __init__(self, command: str, *, timeout: float = 5.0) -> None:
        super().__init__()
        if not command.strip():
            raise ValueError("name the command after 'command:'")
        self.command = command
        self.timeout = timeout
        self.description = f"command {command!r}"

    def read(self) -> int | None:
        try:
            text = command_output(self.command, timeout=self.timeout).strip()
        except ReadFailed as exc:
            self._failed(str(exc))
            return None
        try:
            value = int(text.split()[0]) if text else -1
        except ValueError:
            value = -1
        if value < 0:
            self._failed(f"printed {text[:80]!r}, not a count (a whole number >= 0)")
            return None
        return self._ok(value)

    def close(self) -> None:
        pass


def make_in_flight(spec: str, *, timeout: float = 2.0) -> InFlightSource:
    """Build the source ``spec`` names. Raises ValueError with what is wrong."""
    spec = spec.strip()
    if spec == "none":
        return NoInFlight()
    kind, sep, rest = spec.partition(":")
    if kind == "prometheus" and sep:
        url, hash_sep, names = rest.rpartition("#")
        if not hash_sep or not url:
            raise ValueError(f"{spec!r}: expected prometheus:URL#METRIC[,METRIC...]")
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{spec!r}: the URL must start with http:// or https://")
        metrics = [n.strip() for n in names.split(",") if n.strip()]
        return PrometheusInFlight(url, metrics, timeout=timeout)
    if kind == "command" and sep:
        return CommandInFlight(rest, timeout=max(timeout, 1.0))
    raise ValueError(f"{spec!r}: expected {SPEC_HELP}")
