"""The agent: a sampler thread fills the spool, a sender thread empties it in
order, a command thread long-polls the command channel and hands commands to
the executor (a worker thread running them in order, acks in_progress for slow ones).

The sampler never touches the network, so samples keep their schedule during
an outage; the sender resends the oldest batch until the API takes it (202) or
says it already has it (200 duplicate), backing off with full jitter.

Sampling and sending have their own intervals: a sample every ``interval``
seconds, a batch every ``send_interval`` seconds holding the samples taken
since (at most ``MAX_SAMPLES_PER_BATCH``).
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
from agent.cp_agent.client import CONTRACT, CONTRACT_HOLDERS, CONTRACT_LATENCY, ApiClient, Outcome
from agent.cp_agent.commands import CommandExecutor, CommandRegistry
from agent.cp_agent.holders import HoldersSource, NoHolders
from agent.cp_agent.host import HostMetrics
from agent.cp_agent.inflight import InFlightSource, NoInFlight
from agent.cp_agent.latency import LatencyLog
from agent.cp_agent.spool import Spool

log = logging.getLogger("cp_agent")

MAX_SAMPLES_PER_BATCH = 100


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
    in_progress_acks: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class Agent:
    def __init__(self, *, client: ApiClient, node: str, spool: Spool, backend: ModuleBackend,
                 in_flight: InFlightSource | None = None, interval: float = 5.0, send_interval: float | None = None,
                 host: HostMetrics | None = None, backoff_base: float = 1.0, backoff_cap: float = 60.0,
                 command_wait: float = 20.0, commands: CommandRegistry | None = None, poll_commands: bool = True,
                 progress_after: float = 5.0, progress_every: float = 20.0,
                 latency: LatencyLog | None = None, holders: HoldersSource | None = None) -> None:
        self.client = client
        self.node = node
        self.spool = spool
        self.backend = backend
        # No source given: unknown (null), never a made-up zero that would end every drain at once.
        self.in_flight: InFlightSource = in_flight or NoInFlight()
        self.latency = latency
        self.holders: HoldersSource = holders or NoHolders()
        self.contract = (CONTRACT_HOLDERS if not isinstance(self.holders, NoHolders)
                         else CONTRACT_LATENCY if latency is not None else CONTRACT)
        self.interval = interval
        self.send_interval = interval if send_interval is None else max(send_interval, 0.0)
        # Samples per batch: the samples of one send interval, at least 1, at most MAX_SAMPLES_PER_BATCH.
        self.samples_per_batch = max(1, min(MAX_SAMPLES_PER_BATCH, round(self.send_interval / interval)))
        self.host = host or HostMetrics()
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.command_wait = command_wait
        self.commands = commands or CommandRegistry()
        self.executor = CommandExecutor(self.commands, self._ack, progress_after=progress_after,
                                        progress_every=progress_every)
        self.poll_commands = poll_commands
        self.stats = AgentStats()
        self._stop_sampling = threading.Event()
        self._stop = threading.Event()
        self._new_batch = threading.Event()
        self._threads: list[threading.Thread] = []
        self._send_backoff = Backoff(base=backoff_base, cap=backoff_cap)

    # -- sampling ---------------------------------------------------------------------------------
    def collect(self) -> dict[str, Any]:
        sample = {"time": utc_now_iso(), "node": self.node, **self.host.read(),
                  "in_flight": self.in_flight.read(), "modules": self.backend.read()}
        if self.latency is not None and (histograms := self.latency.read()):
            sample["latency"] = histograms
        if (holders := self.holders.read()) is not None:
            sample["holders"] = holders
        return sample

    def sample_once(self) -> None:
        sample = self.collect()
        sealed = self.spool.add_sample("node_samples", sample, per_batch=self.samples_per_batch,
                                       header={"contract": self.contract})
        self.stats.samples_produced += 1
        if sealed is not None:
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
        # A batch still open this long after its first sample (sampling stalled) goes out as it is.
        stale_after = self.send_interval + self.interval
        while not self._stop.is_set():
            self.spool.seal_open(older_than=stale_after)
            delay = self._send_pending(backoff)
            if delay is None:
                self._new_batch.wait(min(1.0, stale_after))
                self._new_batch.clear()
            else:
                self._stop.wait(delay)

    # -- commands ---------------------------------------------------------------------------------
    def handle_commands(self, wait: float = 0) -> int:
        """Fetch this node's pending commands once and hand them to the executor; when its worker is
        not running (a direct call), run them here. Raises httpx.HTTPError."""
        commands = self.client.fetch_commands(wait=wait)
        for command in commands:
            log.info("command #%s %s received", command.get("id"), command.get("kind"))
            self.executor.submit(command)
        if not self.executor.started:
            self.executor.run_pending()
        return len(commands)

    def _ack(self, command_id: int, status: str, result: dict[str, Any], retry: bool = True) -> bool:
        """Send one ack; with ``retry`` keep trying through outages (a final answer must arrive)."""
        backoff = Backoff(base=self.backoff_base, cap=self.backoff_cap)
        while True:
            try:
                self.client.ack_command(command_id, status, result)
                if status == "in_progress":
                    self.stats.in_progress_acks += 1
                else:
                    self.stats.commands_handled += 1
                return True
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code < 500 and exc.response.status_code not in (401, 429):
                    log.error("ack %s of command #%s refused (HTTP %s): %s", status, command_id,
                              exc.response.status_code, exc.response.text[:200])
                    return False
                delay = backoff.next_delay()
            except httpx.HTTPError:
                delay = backoff.next_delay()
            if not retry:
                return False
            if self._stop.is_set() or backoff.failures > 50:
                log.error("could not acknowledge command #%s; giving up", command_id)
                return False
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
            self.executor.start()
        for name, target in targets:
            thread = threading.Thread(target=target, name=f"cp-agent-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info("agent for node %s started: API %s, contract %d, a sample every %.1f s, a batch every %.1f s "
                 "(%d sample(s)), backend %s, in flight from %s, latencies from %s, spool %s (%d batch(es) pending)",
                 self.node, self.client.api_url, self.contract, self.interval, self.send_interval,
                 self.samples_per_batch, self.backend.name, self.in_flight.description,
                 self.latency.description if self.latency is not None else "nowhere", self.spool.dir,
                 len(self.spool))

    def stop_sampling(self) -> None:
        """Take no more samples; returns once a sample being taken is in the spool, its batch sealed."""
        self._stop_sampling.set()
        for thread in self._threads:
            if thread.name.endswith("sampler"):
                thread.join(timeout=15)
        if self.spool.seal_open() is not None:
            self._new_batch.set()

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
        self.executor.stop()
        for thread in self._threads:
            # the command thread may sit in a long-poll: it is a daemon and stops at its next return
            thread.join(timeout=1.0 if thread.name.endswith("commands") else 15.0)
        self.backend.close()
        self.in_flight.close()
        self.client.close()
        log.info("agent stopped: %s; %d batch(es) left in the spool", self.stats.as_dict(), len(self.spool))
