"""Plays the simulated fleet against a running API over HTTP, the way real
agents do: each node POSTs its samples with its own Agent key and polls its
command channel; the gateway key carries the tier and stage samples.

One asyncio loop with one httpx.AsyncClient for the whole fleet: every tick
the engine steps once, each node's batch is queued and sent (staggered across
the interval), and unsent batches stay queued (bounded, in order, same batch
ids) while the API is down.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from agent.cp_agent.vectors import VECTOR_PATH, VectorRunner
from apps.simulator.engine import Engine
from apps.simulator.specs import FaultSpec, ModuleSpec, NodeSpec
from apps.simulator.vector_faults import combination_drift, perturb_outputs, scale_floats, silent_corruption
from apps.telemetry.batch import MAX_SAMPLES

log = logging.getLogger("simulator")

TELEMETRY_PATH = "/api/v1/telemetry/"
COMMANDS_PATH = "/api/v1/agent/commands/"
# The wire contract the simulated agents speak (docs/agent-protocol.md): 3, as the gateway's tier samples
# carry per-endpoint figures and the node samples their stage latency histograms.
CONTRACT = 3
# Commands the simulated agent understands; anything else is acknowledged "unknown".
STOP_WORK = {"drain", "cordon", "standby", "maintenance"}
RESUME_WORK = {"undrain", "uncordon", "activate", "resume"}
MODULE_HOLD = {"quarantine_module": True, "release_module": False}


@dataclass
class Tokens:
    gateway: str
    nodes: dict[str, str]

    @classmethod
    def load(cls, path: Path) -> Tokens:
        data = json.loads(path.read_text())
        return cls(gateway=str(data.get("gateway") or ""), nodes=dict(data.get("nodes") or {}))


@dataclass
class RunStats:
    ticks: int = 0
    batches_sent: int = 0
    node_samples_sent: int = 0
    gateway_batches_sent: int = 0
    batches_duplicate: int = 0
    batches_rejected: int = 0
    batches_dropped: int = 0
    send_failures: int = 0
    commands: dict[str, int] = field(default_factory=dict)


@dataclass
class Outbox:
    queue: deque[tuple[str, dict[str, Any]]] = field(default_factory=deque)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    retry_at: float = 0.0
    failures: int = 0


class FleetSimulator:
    def __init__(self, *, api: str, tokens: Tokens | Callable[[], Tokens], engine: Engine,
                 load_world: Callable[[], Any], interval: float = 5.0, command_interval: float = 10.0,
                 max_queued: int = 720, timeout: float = 10.0) -> None:
        self.api = api.rstrip("/")
        self._tokens_source = tokens
        self.tokens = tokens if isinstance(tokens, Tokens) else tokens()
        self.engine = engine
        self.load_world = load_world  # async callable -> (nodes, faults[, external endpoints])
        self.interval = interval
        self.command_interval = command_interval
        self.max_queued = max_queued
        self.timeout = timeout
        self.stats = RunStats()
        self.run_id = secrets.token_hex(4)
        self._seq = 0
        self._outboxes: dict[str, Outbox] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stop: asyncio.Event = asyncio.Event()
        self._client: httpx.AsyncClient | None = None
        self.last_nodes: list[NodeSpec] = []
        self.last_faults: list[FaultSpec] = []
        # Regression vectors run on ONNX Runtime for the whole fleet (sessions shared: one model, one
        # session); versions installed by install_versions, per module serial, until the inventory shows them.
        self.vectors = VectorRunner(self._no_fetch)
        self.installed: dict[str, tuple[str, str]] = {}
        self.sync_transport: httpx.BaseTransport | None = None  # tests route vector fetches in-process

    # -- plumbing ---------------------------------------------------------------------------------
    def _headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Agent {key}"}

    def _batch_id(self, who: str) -> str:
        self._seq += 1
        return f"sim.{who[:40]}.{self.run_id}.{self._seq}"

    def _outbox(self, who: str) -> Outbox:
        box = self._outboxes.get(who)
        if box is None:
            box = self._outboxes[who] = Outbox()
        return box

    def _enqueue(self, who: str, payload: dict[str, Any]) -> None:
        box = self._outbox(who)
        batch_id = self._batch_id(who)
        box.queue.append((batch_id, {**payload, "batch_id": batch_id}))
        while len(box.queue) > self.max_queued:
            dropped, _ = box.queue.popleft()
            self.stats.batches_dropped += 1
            log.warning("outbox of %s full: dropped batch %s", who, dropped)

    def _reload_tokens(self) -> None:
        if not isinstance(self._tokens_source, Tokens):
            try:
                self.tokens = self._tokens_source()
            except (OSError, ValueError) as exc:
                log.warning("could not reload agent tokens: %s", exc)

    async def _flush(self, who: str, key: str) -> None:
        """Send ``who``'s queued batches in order until empty or a failure (kept for the next try)."""
        assert self._client is not None
        box = self._outbox(who)
        if box.lock.locked() or time.monotonic() < box.retry_at:
            return
        async with box.lock:
            while box.queue and not self._stop.is_set():
                batch_id, payload = box.queue[0]
                try:
                    response = await self._client.post(TELEMETRY_PATH, json=payload, headers=self._headers(key))
                    code = response.status_code
                except httpx.HTTPError as exc:
                    code, response = 0, None
                    detail = f"{type(exc).__name__}: {exc}"
                if code in (200, 201, 202):
                    box.queue.popleft()
                    box.failures = 0
                    try:
                        body = response.json() if response is not None else {}
                    except ValueError:
                        body = {}
                    if isinstance(body, dict) and body.get("duplicate"):
                        self.stats.batches_duplicate += 1
                    elif who == "gateway":
                        self.stats.gateway_batches_sent += 1
                    else:
                        self.stats.batches_sent += 1
                        self.stats.node_samples_sent += len(payload.get("node_samples", []))
                    continue
                if code and code < 500 and code not in (401, 429):
                    box.queue.popleft()
                    self.stats.batches_rejected += 1
                    detail = response.text[:300] if response is not None else ""
                    log.error("API rejected %s batch %s (HTTP %s): %s", who, batch_id, code, detail)
                    continue
                if code == 401:
                    self._reload_tokens()
                    detail = "unknown or revoked agent key"
                elif code:
                    detail = f"HTTP {code}"
                box.failures += 1
                self.stats.send_failures += 1
                delay = min(30.0, self.interval * 2 ** min(box.failures - 1, 4)) * (0.5 + self.engine.rng.random())
                box.retry_at = time.monotonic() + delay
                noisy = who == "gateway" and box.failures == 1  # one line per outage, not one per node
                log.log(logging.WARNING if noisy or box.failures % 20 == 0 else logging.DEBUG,
                        "sending for %s failed (%s); %d batch(es) queued, retry in %.1f s",
                        who, detail, len(box.queue), delay)
                return

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _later(self, delay: float, who: str, key: str) -> None:
        try:
            await asyncio.wait_for(self._stop.wait(), timeout=delay)
            return
        except TimeoutError:
            pass
        await self._flush(who, key)

    # -- ticks ------------------------------------------------------------------------------------
    async def tick(self, *, stagger: bool = True) -> None:
        if self.stats.ticks and self.stats.ticks % max(1, int(60 / self.interval)) == 0:
            self._reload_tokens()  # nodes added to the inventory (and seeded) since the start
        world = await self.load_world()
        nodes, faults = world[0], world[1]
        endpoints = world[2] if len(world) > 2 else ()
        self.last_nodes, self.last_faults = nodes, faults
        result = self.engine.step(time.time(), nodes, faults, endpoints=endpoints)
        self.stats.ticks += 1
        senders = []
        for hostname, sample in result.node_samples.items():
            key = self.tokens.nodes.get(hostname)
            if not key:
                continue
            self._enqueue(hostname, {"contract": CONTRACT, "node_samples": [{"time": _iso(result.time), **sample}]})
            senders.append((hostname, key))
        if self.tokens.gateway:
            # A batch holds at most MAX_SAMPLES stage samples: a big fleet's per-node breakdown takes several.
            stages = result.stage_samples
            self._enqueue("gateway", {"contract": CONTRACT, "tier_samples": result.tier_samples,
                                      "stage_samples": stages[:MAX_SAMPLES]})
            for k in range(MAX_SAMPLES, len(stages), MAX_SAMPLES):
                self._enqueue("gateway", {"contract": CONTRACT, "stage_samples": stages[k:k + MAX_SAMPLES]})
            senders.append(("gateway", self.tokens.gateway))
        # Boxes of nodes that went silent (crashed) still hold batches: flush them too.
        for who, box in self._outboxes.items():
            if box.queue and who not in dict(senders):
                key = self.tokens.gateway if who == "gateway" else self.tokens.nodes.get(who, "")
                if key:
                    senders.append((who, key))
        n = max(1, len(senders))
        for i, (who, key) in enumerate(senders):
            delay = (self.interval * 0.9) * i / n if stagger else 0.0
            self._spawn(self._later(delay, who, key))
        if self.stats.ticks % max(1, int(60 / self.interval)) == 1:
            log.info("tick %d: simulated %02d:%02d, %.0f req/s, %d node batch(es) sent, %d queued, faults: %s",
                     self.stats.ticks, int(result.sim_time // 3600 % 24), int(result.sim_time // 60 % 60),
                     result.requests_per_s, self.stats.batches_sent, self.queued(),
                     ", ".join(sorted(f"{f.kind}@{f.node or f.params.get('endpoint') or f.params.get('driver', '')}"
                                     for f in faults)) or "none")

    def queued(self) -> int:
        return sum(len(b.queue) for b in self._outboxes.values())

    # -- commands ---------------------------------------------------------------------------------
    def handle_command(self, hostname: str, command: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Answer as the real agent does (docs/agent-protocol.md): a simulated node has no action
        hooks, so its action results carry ``"hook": null``."""
        kind = str(command.get("kind", ""))
        rt = self.engine.runtime(hostname)
        if kind in STOP_WORK:
            self.engine.set_accepting(hostname, False)
            return "succeeded", {"hook": None, "accepting": False, "in_flight": rt.in_flight,
                                 "message": "taking no new work; in-flight work finishes"}
        if kind in RESUME_WORK:
            self.engine.set_accepting(hostname, True)
            return "succeeded", {"hook": None, "accepting": True, "in_flight": rt.in_flight}
        if kind in MODULE_HOLD:
            serial = str((command.get("args") or {}).get("serial", ""))
            if not any(m.serial == serial for n in self.last_nodes if n.hostname == hostname for m in n.modules):
                return "failed", {"hook": None, "message": f"no module {serial!r} on {hostname}"}
            self.engine.set_quarantined(hostname, serial, MODULE_HOLD[kind])
            return "succeeded", {"hook": None, "serial": serial, "in_service": not MODULE_HOLD[kind]}
        if kind == "install_versions":
            return self.install_versions(hostname, command)
        if kind == "ping":
            return "succeeded", {"pong": True, "simulated": True}
        known = sorted(STOP_WORK | RESUME_WORK | set(MODULE_HOLD) | {"ping", "install_versions", "run_vectors"})
        return "unknown", {"message": f"unknown command {kind!r}: the simulated agent handles {', '.join(known)}"}

    def _module(self, hostname: str, serial: str) -> ModuleSpec | None:
        return next((m for n in self.last_nodes if n.hostname == hostname for m in n.modules if m.serial == serial),
                    None)

    def install_versions(self, hostname: str, command: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """A simulated node installs by recording the versions on the modules named (all of its own)."""
        args = command.get("args") or {}
        driver, framework = str(args.get("driver", "")), str(args.get("framework", ""))
        node = next((n for n in self.last_nodes if n.hostname == hostname), None)
        serials = [str(s) for s in args.get("modules") or []] or [m.serial for m in (node.modules if node else ())]
        unknown = [s for s in serials if self._module(hostname, s) is None]
        if unknown or not driver or not framework:
            return "failed", {"hook": None, "message": f"cannot install {driver!r} + {framework!r} on "
                              f"{', '.join(unknown) or 'no module'} of {hostname}"}
        for serial in serials:
            self.installed[serial] = (driver, framework)
        return "succeeded", {"hook": None, "versions": {"driver": driver, "framework": framework},
                             "modules": serials, "message": "the simulated modules recorded the versions"}

    def versions_of(self, hostname: str, serial: str) -> tuple[str, str]:
        if serial in self.installed:
            return self.installed[serial]
        module = self._module(hostname, serial)
        return (module.driver_version, module.framework_version) if module else ("", "")

    @staticmethod
    def _no_fetch(sha256: str) -> dict[str, Any]:
        raise RuntimeError("vectors are fetched with the key of the node that runs them")

    def run_vectors(self, hostname: str, key: str, command: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Run the vectors on ONNX Runtime as the real agent does, then apply the simulator's faults:
        a bad combination perturbs its operator's outputs (the same way on every module on it)."""
        args = dict(command.get("args") or {})
        serial = str(args.get("module", ""))
        module = self._module(hostname, serial)
        if module is None:
            return "failed", {"message": f"no module {serial!r} on {hostname}"}
        driver, framework = self.versions_of(hostname, serial)
        faults = list(self.last_faults)
        node = next(n for n in self.last_nodes if n.hostname == hostname)
        corrupt = silent_corruption(node=node, serial=serial, faults=faults)

        def perturb_for(vector: dict[str, Any]) -> Any:
            error = combination_drift(driver=driver, framework=framework, module_type=module.module_type,
                                      operator=str(vector.get("operator", "")), faults=faults)
            case_key = f"{driver}|{framework}|{vector.get('sha256')}"

            def perturb(outputs: list[Any]) -> list[Any]:
                if error is not None:
                    outputs = perturb_outputs(outputs, error=error, key=case_key)
                if corrupt is not None:
                    outputs = scale_floats(outputs, corrupt)
                return outputs

            return perturb if error is not None or corrupt is not None else None

        with httpx.Client(base_url=self.api, timeout=self.timeout, headers=self._headers(key),
                          transport=self.sync_transport) as client:
            def fetch(sha256: str) -> dict[str, Any]:
                response = client.get(VECTOR_PATH.format(sha256=sha256))
                response.raise_for_status()
                return dict(response.json())

            return self.vectors.run(args, perturb_for=perturb_for, fetch=fetch)

    async def poll_commands(self, hostname: str, key: str) -> int:
        assert self._client is not None
        try:
            response = await self._client.get(COMMANDS_PATH, params={"wait": 0}, headers=self._headers(key))
            if response.status_code != 200:
                return 0
            commands = response.json()
            if isinstance(commands, dict):
                commands = commands.get("results", [])
            for command in commands:
                if command.get("kind") == "run_vectors":
                    status, result = await asyncio.to_thread(self.run_vectors, hostname, key, command)
                else:
                    status, result = self.handle_command(hostname, command)
                self.stats.commands[status] = self.stats.commands.get(status, 0) + 1
                log.info("command #%s %s for %s -> %s", command.get("id"), command.get("kind"), hostname, status)
                for _ in range(3):
                    ack = await self._client.post(f"{COMMANDS_PATH}{command['id']}/ack/",
                                                  json={"status": status, "result": result},
                                                  headers=self._headers(key))
                    if ack.status_code < 500:
                        break
                    await asyncio.sleep(1)
            return len(commands)
        except httpx.HTTPError:
            return 0

    async def _command_loop(self) -> None:
        while not self._stop.is_set():
            crashed = {h for h, rt in self.engine.nodes.items() if rt.crashed}
            targets = [(h, k) for h, k in self.tokens.nodes.items()
                       if h not in crashed and any(n.hostname == h for n in self.last_nodes)]
            n = max(1, len(targets))
            for hostname, key in targets:
                if self._stop.is_set():
                    return
                await self.poll_commands(hostname, key)
                await _sleep_or_stop(self._stop, self.command_interval / n)
            if not targets:
                await _sleep_or_stop(self._stop, self.command_interval)

    # -- lifecycle --------------------------------------------------------------------------------
    async def run(self, duration: float | None = None) -> RunStats:
        limits = httpx.Limits(max_connections=8, max_keepalive_connections=8)
        # Loop-bound primitives are made here, so run() may be called again (a new event loop).
        self._stop = asyncio.Event()
        for box in self._outboxes.values():
            box.lock = asyncio.Lock()
        async with httpx.AsyncClient(base_url=self.api, timeout=self.timeout, limits=limits) as client:
            self._client = client
            started = time.monotonic()
            log.info("simulating %d node(s) against %s every %.1f s (speed %gx, seed %s)",
                     len(self.tokens.nodes), self.api, self.interval, self.engine.config.speed, self.engine.seed)
            commands: asyncio.Task[None] | None = None
            next_tick = time.monotonic()
            failures = 0
            while not self._stop.is_set():
                if duration is not None and time.monotonic() - started >= duration:
                    break
                try:
                    await self.tick()
                except Exception as exc:  # a bad tick (database restart) must not end the simulation
                    failures += 1
                    delay = min(30.0, self.interval * 2 ** min(failures - 1, 5)) * (0.5 + self.engine.rng.random())
                    if failures == 1:
                        log.exception("simulation tick failed; retrying with backoff")
                    else:
                        log.warning("simulation tick failed again (%s); retry %d in %.1f s", exc, failures, delay)
                    await _sleep_or_stop(self._stop, delay)
                    next_tick = time.monotonic()
                    continue
                if failures:
                    log.warning("simulation ticking again after %d failed tick(s)", failures)
                    failures = 0
                if commands is None and self.command_interval > 0:
                    commands = asyncio.ensure_future(self._command_loop())
                next_tick += self.interval
                await _sleep_or_stop(self._stop, max(0.0, next_tick - time.monotonic()))
            self._stop.set()
            if commands is not None:
                await asyncio.gather(commands, return_exceptions=True)
            await asyncio.gather(*self._tasks, return_exceptions=True)
            # A last try for what is still queued.
            self._stop.clear()
            for who, box in list(self._outboxes.items()):
                key = self.tokens.gateway if who == "gateway" else self.tokens.nodes.get(who, "")
                if key and box.queue:
                    box.retry_at = 0
                    await self._flush(who, key)
            self._stop.set()
            self._client = None
        log.info("simulation stopped: %s", self.stats)
        return self.stats

    def stop(self) -> None:
        self._stop.set()


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), timeout=max(0.0, seconds))
    except TimeoutError:
        pass


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
