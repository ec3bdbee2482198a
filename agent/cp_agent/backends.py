"""Module backends: where a node's per-module metrics come from.

A backend lists the node's modules, reads their metrics (one dict per module,
in the telemetry contract's shape) and, from the regression-vector issue on,
runs test vectors through the module's runtime.

- ``none``: a node without modules (access & logic tier).
- ``reference``: ONNX Runtime on the CPU, standing in for one module.  A small
  INT8 ``QLinearMatMul`` model (built with ``onnx.helper``) runs in a worker
  thread at a steady rate; utilisation is the measured fraction of wall time
  spent inside inference.  Temperature comes from the host's sensors when it
  has any, power is estimated from the configured TDP and the utilisation.
- ``simulated``: modules with plausible synthetic metrics (random walk), for
  trying the agent without hardware.  The fleet simulator has its own richer
  model (apps/simulator/engine.py).
- ``exporter:URL``: a real node's modules, read from a Prometheus exporter it
  already runs (dcgm-exporter, an NPU vendor's) through a mapping file
  (``cp_agent/exporter.py``).

Module fields a backend cannot read are ``None`` (sent as null: missing, not zero).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any, Protocol, runtime_checkable

import psutil

log = logging.getLogger("cp_agent.backends")


@runtime_checkable
class ModuleBackend(Protocol):
    name: str

    def modules(self) -> list[str]:
        """Serial numbers of the modules this backend reports."""
        ...

    def read(self) -> list[dict[str, Any]]:
        """One metrics dict per module: serial, util, temp_c, power_w, link_width,
        link_width_expected, ecc_corrected, ecc_uncorrected, errors."""
        ...

    def run_vector(self, model: bytes, inputs: dict[str, Any]) -> list[Any]:
        """Run one regression test vector (an ONNX model) and return its outputs."""
        ...

    def close(self) -> None: ...


class NoModules:
    name = "none"

    def modules(self) -> list[str]:
        return []

    def read(self) -> list[dict[str, Any]]:
        return []

    def run_vector(self, model: bytes, inputs: dict[str, Any]) -> list[Any]:
        raise NotImplementedError("this node has no modules to run vectors on")

    def close(self) -> None:
        pass


def build_qlinear_matmul(m: int = 16, k: int = 64, n: int = 64, seed: int = 7) -> bytes:
    """A small INT8 (uint8-quantised) QLinearMatMul model, serialised."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    b = rng.integers(0, 255, size=(k, n), dtype=np.uint8)
    inits = [
        numpy_helper.from_array(np.array(0.02, dtype=np.float32), "a_scale"),
        numpy_helper.from_array(np.array(128, dtype=np.uint8), "a_zero_point"),
        numpy_helper.from_array(b, "b"),
        numpy_helper.from_array(np.array(0.02, dtype=np.float32), "b_scale"),
        numpy_helper.from_array(np.array(128, dtype=np.uint8), "b_zero_point"),
        numpy_helper.from_array(np.array(0.5, dtype=np.float32), "y_scale"),
        numpy_helper.from_array(np.array(128, dtype=np.uint8), "y_zero_point"),
    ]
    node = helper.make_node(
        "QLinearMatMul",
        ["a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"],
        ["y"],
    )
    graph = helper.make_graph(
        [node], "int8_matmul",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [m, n])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="cp-agent")
    model.ir_version = 8
    return bytes(model.SerializeToString())


def _session(model: bytes) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])


class ReferenceBackend:
    """ONNX Runtime on the CPU as one module. ``rate`` inferences per second keep it busy."""

    name = "reference"

    def __init__(self, *, serial: str, rate: float = 50.0, tdp_w: float = 15.0, link_width: int = 4) -> None:
        import numpy as np

        self.serial = serial
        self.rate = max(0.0, rate)
        self.tdp_w = tdp_w
        self.link_width = link_width
        self.errors = 0
        self.versions: dict[str, Any] = {}
        self.inferences = 0
        self._session = _session(build_qlinear_matmul())
        self._input = np.random.default_rng(1).integers(0, 255, size=(16, 64), dtype=np.uint8)
        self._busy = 0.0
        self._lock = threading.Lock()
        self._window_start = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name="reference-backend", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        period = 1.0 / self.rate if self.rate else 1.0
        next_at = time.monotonic()
        while not self._stop.is_set():
            if self.rate:
                t0 = time.monotonic()
                try:
                    self._session.run(None, {"a": self._input})
                    self.inferences += 1
                except Exception as exc:  # a runtime error is a module error, counted and logged
                    self.errors += 1
                    log.error("reference inference failed: %s", exc)
                with self._lock:
                    self._busy += time.monotonic() - t0
            next_at += period
            delay = next_at - time.monotonic()
            if delay < 0:  # fell behind (CPU contention): do not try to catch up
                next_at = time.monotonic()
                delay = 0
            self._stop.wait(delay)

    def modules(self) -> list[str]:
        return [self.serial]

    def _temp_c(self, util: float) -> float:
        try:
            sensors = psutil.sensors_temperatures()  # type: ignore[attr-defined]
        except (AttributeError, OSError):
            sensors = {}
        readings = [t.current for entries in (sensors or {}).values() for t in entries if t.current]
        if readings:
            return float(max(readings))
        return round(30.0 + 35.0 * util, 1)  # no sensor: estimate

    def read(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        with self._lock:
            elapsed = max(1e-6, now - self._window_start)
            util = min(1.0, self._busy / elapsed)
            self._busy = 0.0
            self._window_start = now
        return [{
            "serial": self.serial,
            "util": round(util, 4),
            "temp_c": self._temp_c(util),
            "power_w": round(self.tdp_w * (0.3 + 0.7 * util), 2),
            "link_width": self.link_width,
            "link_width_expected": self.link_width,
            "ecc_corrected": 0,
            "ecc_uncorrected": 0,
            "errors": self.errors,
        }]

    def run_vector(self, model: bytes, inputs: dict[str, Any]) -> list[Any]:
        return list(_session(model).run(None, inputs))

    def record_versions(self, versions: dict[str, Any]) -> None:
        """A stand-in has nothing to install: it remembers what it was told to run."""
        self.versions = dict(versions)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


class SimulatedBackend:
    """Synthetic modules: utilisation follows a bounded random walk; the rest follows it."""

    name = "simulated"

    def __init__(self, *, serials: list[str], seed: int | None = None, tdp_w: float = 10.0) -> None:
        self._rng = random.Random(seed)
        self.versions: dict[str, Any] = {}
        self._serials = list(serials)
        self._util = {s: self._rng.uniform(0.2, 0.6) for s in self._serials}
        self.tdp_w = tdp_w

    def modules(self) -> list[str]:
        return list(self._serials)

    def read(self) -> list[dict[str, Any]]:
        out = []
        for s in self._serials:
            u = min(0.98, max(0.02, self._util[s] + self._rng.gauss(0, 0.05)))
            self._util[s] = u
            out.append({
                "serial": s, "util": round(u, 4),
                "temp_c": round(38 + 30 * u + self._rng.gauss(0, 0.5), 1),
                "power_w": round(self.tdp_w * (0.3 + 0.7 * u), 2),
                "link_width": 4, "link_width_expected": 4,
                "ecc_corrected": 0, "ecc_uncorrected": 0, "errors": 0,
            })
        return out

    def run_vector(self, model: bytes, inputs: dict[str, Any]) -> list[Any]:
        return list(_session(model).run(None, inputs))

    def record_versions(self, versions: dict[str, Any]) -> None:
        """A stand-in has nothing to install: it remembers what it was told to run."""
        self.versions = dict(versions)

    def close(self) -> None:
        pass


def make_backend(kind: str, *, node: str, serials: list[str], seed: int | None = None,
                 reference_rate: float = 50.0, mapping: str = "", aliases: dict[str, str] | None = None
                 ) -> ModuleBackend:
    """``none``, ``reference``, ``simulated`` or ``exporter:URL`` (with ``mapping``). Raises ValueError."""
    if kind == "none":
        return NoModules()
    if kind == "reference":
        return ReferenceBackend(serial=serials[0] if serials else f"{node}-cpu0", rate=reference_rate)
    if kind == "simulated":
        return SimulatedBackend(serials=serials or [f"{node}-m0"], seed=seed)
    if kind.startswith("exporter:"):
        from agent.cp_agent.exporter import ExporterBackend, load_mapping

        url = kind.removeprefix("exporter:")
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"backend {kind!r}: expected exporter:http://HOST:PORT/metrics")
        if not mapping:
            raise ValueError("the exporter backend needs --mapping (a file, or a shipped name: dcgm-exporter)")
        return ExporterBackend(url=url, mapping=load_mapping(mapping), aliases=dict(aliases or {}),
                               known_serials=list(serials))
    raise ValueError(f"unknown backend {kind!r}: use none, reference, simulated or exporter:URL")
