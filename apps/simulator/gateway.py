"""What the simulated gateway and agents report beside the traffic itself: per tier the queue,
arrivals and tokens; per stage the latency summaries, and per serving hybrid node its own
breakdown (what a rollout's cohort gate compares); per external endpoint its requests, errors,
tokens and latency under the endpoint faults; and per node a histogram of every request's stage
latency (contract 3). The engine (``engine.py``) computes the load; these turn it into samples."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime
from typing import Any

from agent.cp_agent import sketch
from apps.simulator.specs import (
    ACCESS,
    CPU_STAGES,
    EXTERNAL,
    HYBRID,
    MODEL_STAGES,
    SIGMA,
    Config,
    EndpointSpec,
    FaultSpec,
    NodeSpec,
)

EXTERNAL_MS = 900.0
PER_NODE_DRAWS = 60  # latency draws per node and stage in the gateway's per-node breakdown
ENDPOINT_ERROR_RATE = 0.002  # requests a healthy endpoint fails
ENDPOINT_FAULTS = frozenset({"endpoint_slow", "endpoint_errors", "endpoint_quota"})


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    idx = min(len(sorted_values) - 1, max(0, int(math.ceil(q * len(sorted_values))) - 1))
    return sorted_values[idx]


def poisson(rng: random.Random, lam: float) -> int:
    """A Poisson draw (a normal one for a large mean)."""
    if lam <= 0:
        return 0
    if lam > 50:
        return max(0, int(round(rng.gauss(lam, math.sqrt(lam)))))
    threshold, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= threshold:
            return k
        k += 1


class GatewayReports:
    """The engine's reporting half (``Engine`` is one): reads the engine's clocks and random streams."""

    config: Config
    rng: random.Random
    breakdown_rng: random.Random
    latency_rng: random.Random
    recorded_latencies: dict[tuple[str, str], list[float]] | None
    backlog: float
    last_target_rps: float

    def _generation_share(self, access_rps: float, hybrid: dict[str, dict[str, Any]]) -> float:
        """Of a hybrid node's intent calls, the share that also runs generation locally (the rest goes to
        the external large model)."""
        hyb_rps = sum(d["rate"] for d in hybrid.values())
        return (access_rps - access_rps * self.config.external_share) / hyb_rps if hyb_rps else 0.0

    def _latency_histograms(self, node_samples: dict[str, dict[str, Any]], access_rates: dict[str, float],
                            cpu_ms: dict[str, dict[str, float]], hybrid: dict[str, dict[str, Any]],
                            dt: float) -> None:
        """What a node's agent sends from its serving process's latency log (contract 3): per stage it
        serves, a log-bucket histogram of every request's latency in the window: an access node's CPU
        stages, a hybrid node's model stages, each a lognormal around the node's own stage latency."""
        window = max(0.001, dt)
        share = self._generation_share(sum(access_rates.values()), hybrid)
        for host, sample in node_samples.items():
            per_stage: dict[str, tuple[float, int]] = {}
            if access_rates.get(host, 0.0) > 0 and host in cpu_ms:
                count = int(round(access_rates[host] * window))
                per_stage = {s: (cpu_ms[host][s], count) for s in CPU_STAGES}
            elif host in hybrid and hybrid[host]["rate"] > 0:
                d = hybrid[host]
                per_stage = {s: (d["stage_ms"][s], int(round(d["rate"] * window * (1.0 if s == "intent" else share))))
                             for s in MODEL_STAGES}
            latency = {}
            for s, (median, count) in per_stage.items():
                if count <= 0:
                    continue
                draws = [median * math.exp(self.latency_rng.gauss(0, SIGMA[s])) for _ in range(count)]
                if self.recorded_latencies is not None:
                    self.recorded_latencies.setdefault((host, s), []).extend(draws)
                latency[s] = sketch.histogram(draws)
            if latency:
                sample["latency"] = latency

    def _draw(self, parts: list[tuple[float, float]], stage: str, n: int) -> list[float]:
        """Latency draws (ms) from a mixture of per-node lognormals: parts = [(weight, median_ms)]."""
        total = sum(w for w, _ in parts)
        if total <= 0 or n <= 0:
            return []
        sigma = SIGMA[stage]
        out: list[float] = []
        for w, median in parts:
            k = max(1, int(round(n * w / total))) if w > 0 else 0
            out.extend(median * math.exp(self.rng.gauss(0, sigma)) for _ in range(k))
        out.sort()
        return out

    def _summary(self, tier: str, stage: str, count: int, draws: list[float], window: float,
                 now_iso: str) -> dict[str, Any]:
        return {"time": now_iso, "tier": tier, "stage": stage, "window_s": round(window, 3), "count": count,
                "p50_ms": round(_percentile(draws, 0.5), 1), "p95_ms": round(_percentile(draws, 0.95), 1),
                "p99_ms": round(_percentile(draws, 0.99), 1), "max_ms": round(draws[-1] if draws else 0.0, 1)}

    def _tier_samples(self, access: list[NodeSpec], access_rates: dict[str, float],
                      cpu_ms: dict[str, dict[str, float]], cpu_idle_ms: dict[str, float],
                      hybrid: dict[str, dict[str, Any]],
                      model_ms: dict[str, float], completed_tasks: int, now: float, dt: float,
                      endpoints: list[EndpointSpec] | None = None, faults: list[FaultSpec] | None = None
                      ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        cfg = self.config
        now_iso = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        window = max(0.001, dt)
        total_rps = sum(access_rates.values())
        requests = int(round(total_rps * window))
        ext_rps = total_rps * cfg.external_share
        hyb_rps = sum(d["rate"] for d in hybrid.values())

        def tokens(rate: float, per: int) -> int:
            return int(round(rate * window * per * (0.9 + 0.2 * self.rng.random())))

        # Queue depth: requests waiting (Little's law on the wait beyond each node's own idle service
        # time: a slower clock or a slower module serves slower, it does not queue), plus tasks that
        # found no schedulable node.
        q_access = sum(access_rates[h] * max(0.0, sum(cpu_ms[h].values()) - cpu_idle_ms[h]) / 1000
                       for h in access_rates if h in cpu_ms) + self.backlog * (cfg.rounds_min + cfg.rounds_max) / 2
        q_hybrid = sum(d["rate"] * max(0.0, sum(d["stage_ms"].values()) - d["idle_ms"]) / 1000
                       for d in hybrid.values())
        tier_samples = [
            {"time": now_iso, "tier": ACCESS, "window_s": round(window, 3), "queue_depth": int(round(q_access)),
             "arrivals": int(round(self.last_target_rps * window)), "completions": requests,
             "input_tokens": tokens(total_rps, cfg.input_tokens),
             "output_tokens": tokens(total_rps, cfg.output_tokens)},
            {"time": now_iso, "tier": HYBRID, "window_s": round(window, 3), "queue_depth": int(round(q_hybrid)),
             "arrivals": int(round(hyb_rps * window)), "completions": int(round(hyb_rps * window)),
             "input_tokens": tokens(hyb_rps, cfg.input_tokens), "output_tokens": tokens(hyb_rps, cfg.output_tokens)},
            {"time": now_iso, "tier": EXTERNAL, "window_s": round(window, 3),
             "queue_depth": int(round(ext_rps * 0.05)),
             "arrivals": int(round(ext_rps * window)), "completions": int(round(ext_rps * window)),
             "input_tokens": tokens(ext_rps, cfg.input_tokens), "output_tokens": tokens(ext_rps, cfg.output_tokens)},
        ]
        stage_samples = []
        n_draws = cfg.draws
        for s in CPU_STAGES:
            parts = [(access_rates[h], cpu_ms[h][s]) for h in access_rates if h in cpu_ms and access_rates[h] > 0]
            stage_samples.append(self._summary(ACCESS, s, requests, self._draw(parts, s, min(n_draws, requests)),
                                               window, now_iso))
        for s in MODEL_STAGES:
            parts = [(d["rate"], d["stage_ms"][s]) for d in hybrid.values() if d["rate"] > 0]
            count = int(round(hyb_rps * window)) if s == "intent" else int(round((total_rps - ext_rps) * window))
            stage_samples.append(self._summary(HYBRID, s, count, self._draw(parts, s, min(n_draws, count)),
                                               window, now_iso))
        # The gateway's per-node breakdown of the model stages, what a rollout's cohort gate compares:
        # each serving hybrid node's own calls and latency (no request fails in the simulator's stages).
        generation_share = self._generation_share(total_rps, hybrid)
        for host, d in hybrid.items():
            for s in MODEL_STAGES:
                count = int(round(d["rate"] * window * (1.0 if s == "intent" else generation_share)))
                if count <= 0:
                    continue
                draws = sorted(d["stage_ms"][s] * math.exp(self.breakdown_rng.gauss(0, SIGMA[s]))
                               for _ in range(min(PER_NODE_DRAWS, count)))
                stage_samples.append({**self._summary(HYBRID, s, count, draws, window, now_iso), "node": host,
                                      "errors": 0})
        ext_count = int(round(ext_rps * window))
        ext_parts = [(1.0, EXTERNAL_MS)]
        if endpoints:
            figures, ext_parts = self._endpoint_figures(endpoints, faults or [], ext_rps, window)
            tier_samples[2]["endpoints"] = figures
        stage_samples.append(self._summary(EXTERNAL, "generation", ext_count,
                                           self._draw(ext_parts, "generation", min(n_draws, ext_count)),
                                           window, now_iso))
        return tier_samples, stage_samples

    def _endpoint_figures(self, endpoints: list[EndpointSpec], faults: list[FaultSpec], ext_rps: float,
                          window: float) -> tuple[list[dict[str, Any]], list[tuple[float, float]]]:
        """The gateway's figures per endpoint over the window: the external tier's requests spread by quota
        (requests, failed ones, tokens, latency p95), and the latency mixture of the tier's generation stage.
        Faults name their endpoint (``params.endpoint``): ``endpoint_slow`` multiplies its latency,
        ``endpoint_errors`` fails a share of its requests, ``endpoint_quota`` raises its traffic to a share of
        its requests quota."""
        cfg = self.config
        total_quota = sum(e.quota_rpm for e in endpoints)
        figures: list[dict[str, Any]] = []
        parts: list[tuple[float, float]] = []
        for e in endpoints:
            f = {x.kind: x.params for x in faults if x.kind in ENDPOINT_FAULTS and x.params.get("endpoint") == e.name}
            rate = ext_rps * (e.quota_rpm / total_quota if total_quota else 1 / len(endpoints))
            if "endpoint_quota" in f:
                rate = max(rate, float(f["endpoint_quota"].get("use", 0.95)) * e.quota_rpm / 60)
            requests = poisson(self.rng, rate * window)
            failing = ENDPOINT_ERROR_RATE + float(f.get("endpoint_errors", {}).get("error_rate", 0.0))
            errors = min(requests, poisson(self.rng, requests * min(1.0, failing)))
            median = EXTERNAL_MS * float(f.get("endpoint_slow", {}).get("latency_factor", 1.0))
            draws = self._draw([(1.0, median)], "generation", min(cfg.draws, requests)) if requests else []
            per_request = (cfg.input_tokens + cfg.output_tokens) * (0.9 + 0.2 * self.rng.random())
            figures.append({"endpoint": e.name, "requests": requests, "errors": errors,
                            "tokens": int(round(requests * per_request)),
                            "p95_ms": round(_percentile(draws, 0.95), 1) if draws else None})
            parts.append((rate, median))
        return figures, parts if any(w > 0 for w, _ in parts) else [(1.0, EXTERNAL_MS)]
