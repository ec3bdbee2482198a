"""The agent: a sampler thread fills the spool, a sender thread empties it in
order, a command thread long-polls the command channel.

The sampler never touches the network, so samples keep their schedule during
an outage; the sender resends the oldest batch until the API takes it (202) or
says it already has it (200 duplicate), backing off with full jitter.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from agent.cp_agent.backends import ModuleBackend
from agent.cp_agent.backoff import Backoff
from agent.cp_agent.client import ApiClient, Outcome
from agent.cp_agent.commands import CommandRegistry
from agent.cp_agent.host import HostMetrics
from agent.cp_agent.spool import Spool

log = logging.getLogger("cp_agent")


def utc_now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class AgentStats:
    samples_produced: int = 0
    batches_stored: int = 0
    samples_stored: int = 0
    batches_duplicate: int = 0
    batches_rejected: int = 0
    samples_rejected: int = 0
    send_failures: int = 0
    outages: int = 0
    commands_handled: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class Agent:
    def __init__(self, *, client: ApiClient, node: str, spool: Spool, backend: ModuleBackend,
                 interval: float = 5.0, host: HostMetrics | None = None,
                 backoff_base: float = 1.0, backoff_cap: float = 60.0, command_wait: float = 20.0,
                 commands: CommandRegistry | None = None, poll_commands: bool = True,
                 in_flight: Callable[[], int] | None = None) -> None:
        self.client = client
        self.node = node
        self.spool = spool
        self.backend = backend
        self.interval = interval
        self.host = host or HostMetrics()
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.command_wait = command_wait
        self.commands = commands or CommandRegistry()
        self.poll_commands = poll_commands
        self.in_flight = in_flight or (lambda: 0)
        self.stats = AgentStats()
        self._stop_sampling = threading.Event()
        self._stop = threading.Event()
        self._new_batch = threading.Event()
        self._threads: list[threading.Thread] = []
        self._send_backoff = Backoff(base=backoff_base, cap=backoff_cap)

    # -- sampling ---------------------------------------------------------------------------------
    def collect(self) -> dict[str, Any]:
        return {"time": utc_now_iso(), "node": self.node, **self.host.read(),
                "in_flight": int(self.in_flight()), "modules": self.backend.read()}

    def sample_once(self) -> None:
        sample = self.collect()
        self.spool.append({"node_samples": [sample]})
        self.stats.samples_produced += 1
        self._new_batch.set()

    def _sampler(self) -> None:
        next_at = time.monotonic()
        while not self._stop_sampling.is_set():
            try:
                self.sample_once()
            except Exception:  # a broken sensor must not stop the agent
                log.exception("collecting a sample failed")
            next_at += self.interval
            now = time.monotonic()
            if next_at < now:  # overslept (suspended host): skip, do not burst
                next_at = now + self.interval
            self._stop_sampling.wait(next_at - now)

    # -- sending ----------------------------------------------------------------------------------
    def send_pending(self) -> bool:
        """Send spooled batches oldest first until the spool is empty (True) or a send fails (False)."""
        return self._send_pending(self._send_backoff) is None

    def _send_pending(self, backoff: Backoff) -> float | None:
        """None when the spool is empty, else the delay before the next try."""
        while not self._stop.is_set():
            batches = self.spool.peek(1)
            if not batches:
                return None
            batch = batches[0]
            result = self.client.send_batch(batch.payload)
            if result.outcome in (Outcome.STORED, Outcome.DUPLICATE):
                self.spool.remove(batch)
                if result.outcome is Outcome.STORED:
                    self.stats.batches_stored += 1
                    self.stats.samples_stored += batch.sample_count
                else:
                    self.stats.batches_duplicate += 1
                    log.info("batch %s was already stored (a resend); nothing duplicated", batch.batch_id)
                if backoff.failures:
                    log.warning("API reachable again after %d failed attempt(s); %d batch(es) still spooled",
                                backoff.failures, len(self.spool))
                    backoff.reset()
                continue
            if result.outcome is Outcome.REJECTED:
                self.spool.remove(batch)
                self.stats.batches_rejected += 1
                self.stats.samples_rejected += batch.sample_count
                log.error("API rejected batch %s (HTTP %s): %s; dropped it", batch.batch_id, result.status,
                          result.detail)
                continue
            if not backoff.failures:
                self.stats.outages += 1
            self.stats.send_failures += 1
            delay = backoff.next_delay()
            what = f"HTTP {result.status}" if result.status else "unreachable"
            level = logging.WARNING if backoff.failures == 1 or backoff.failures % 10 == 0 else logging.INFO
            log.log(level, "API %s (%s); keeping %d batch(es) in the spool, retry %d in %.1f s",
                    what, result.detail[:200], len(self.spool), backoff.failures, delay)
            return delay
        return None

    def _sender(self) -> None:
        backoff = self._send_backoff
        while not self._stop.is_set():
            delay = self._send_pending(backoff)
            if delay is None:
                self._new_batch.wait(1.0)
                self._new_batch.clear()
            else:
                self._stop.wait(delay)

    # -- commands ---------------------------------------------------------------------------------
    def handle_commands(self, wait: float = 0) -> int:
        """Fetch this node's pending commands once, handle and acknowledge each. Raises httpx.HTTPError."""
        commands = self.client.fetch_commands(wait=wait)
        for command in commands:
            status, result = self.commands.handle(command)
            log.info("command #%s %s -> %s", command.get("id"), command.get("kind"), status)
            self._ack(int(command["id"]), status, result)
            self.stats.commands_handled += 1
        return len(commands)

    def _ack(self, command_id: int, status: str, result: dict[str, Any]) -> None:
        backoff = Backoff(base=self.backoff_base, cap=self.backoff_cap)
        while True:
            try:
                self.client.ack_command(command_id, status, result)
                return
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code < 500 and exc.response.status_code not in (401, 429):
                    log.error("ack of command #%s refused (HTTP %s): %s", command_id,
                              exc.response.status_code, exc.response.text[:200])
                    return
                delay = backoff.next_delay()
            except httpx.HTTPError:
                delay = backoff.next_delay()
            if self._stop.is_set() or backoff.failures > 50:
                log.error("could not acknowledge command #%s; giving up", command_id)
                return
            log.warning("ack of command #%s failed; retry in %.1f s", command_id, delay)
            self._stop.wait(delay)

    def _commander(self) -> None:
        backoff = Backoff(base=self.backoff_base, cap=self.backoff_cap)
        while not self._stop.is_set():
            try:
                self.handle_commands(wait=self.command_wait)
                backoff.reset()
            except Exception as exc:  # network errors, and a client closed under us at shutdown
                if self._stop.is_set():
                    return
                if not isinstance(exc, httpx.HTTPError):
                    log.exception("command channel error")
                delay = backoff.next_delay()
                if backoff.failures in (1, 10) or backoff.failures % 50 == 0:
                    log.warning("command channel unavailable (%s); retry in %.1f s", exc, delay)
                self._stop.wait(delay)

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        targets: list[tuple[str, Callable[[], None]]] = [("sampler", self._sampler), ("sender", self._sender)]
        if self.poll_commands:
            targets.append(("commands", self._commander))
        for name, target in targets:
            thread = threading.Thread(target=target, name=f"cp-agent-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info("agent for node %s started: API %s, every %.1f s, backend %s, spool %s (%d batch(es) pending)",
                 self.node, self.client.api_url, self.interval, self.backend.name, self.spool.dir, len(self.spool))

    def stop_sampling(self) -> None:
        """Take no more samples; returns once a sample being taken is in the spool."""
        self._stop_sampling.set()
        for thread in self._threads:
            if thread.name.endswith("sampler"):
                thread.join(timeout=15)

    def wait_drained(self, timeout: float) -> bool:
        """Wait until the spool is empty (everything sent); False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.spool) == 0:
                return True
            time.sleep(0.05)
        return len(self.spool) == 0

    def stop(self, drain_timeout: float = 0.0) -> None:
        self.stop_sampling()
        if drain_timeout > 0:
            self.wait_drained(drain_timeout)
        self._stop.set()
        self._new_batch.set()
        for thread in self._threads:
            # the command thread may sit in a long-poll: it is a daemon and stops at its next return
            thread.join(timeout=1.0 if thread.name.endswith("commands") else 15.0)
        self.backend.close()
        self.client.close()
        log.info("agent stopped: %s; %d batch(es) left in the spool", self.stats.as_dict(), len(self.spool))
