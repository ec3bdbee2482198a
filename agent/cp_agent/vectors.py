"""Regression test vectors on the agent: fetch by hash (cached), execute on the module's
runtime, send the outputs back, compactly encoded, with timings.

The agent does not judge: the control plane compares the outputs with the expected ones
and the tolerances (it never asks the agent whether a case passed). Per case the agent
reports ``ok`` with its outputs, ``unsupported`` when the runtime refuses to load the model
(e.g. NOT_IMPLEMENTED for an operator version it lacks) or ``error`` when it loaded and then
failed, each with the runtime's own message.

Tensors travel as ``{"name", "dtype", "shape", "data"}``, data the raw little-endian bytes,
zlib-compressed, base64 (the same format as the control plane's apps/vectors/codec.py).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

log = logging.getLogger("cp_agent.vectors")

VECTOR_PATH = "/api/v1/agent/vectors/{sha256}/"


_DTYPE_NAMES: dict[Any, str] = {}


def encode(array: Any, name: str = "") -> dict[str, Any]:
    a = np.asarray(array)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    dtype = _DTYPE_NAMES.get(a.dtype)
    if dtype is None:
        dtype = _DTYPE_NAMES[a.dtype] = a.dtype.name
    # Level 1: small tensors gain little from more, and the agent's time is what a run waits for.
    return {"name": name, "dtype": dtype, "shape": list(a.shape),
            "data": base64.b64encode(zlib.compress(a.tobytes(), 1)).decode("ascii")}


def decode(tensor: dict[str, Any]) -> np.ndarray:
    if str(tensor.get("dtype", "")) not in np.sctypeDict:
        import ml_dtypes  # noqa: F401  (low-precision dtypes: float8, int4...)
    raw = zlib.decompress(base64.b64decode(tensor["data"]))
    dtype = np.dtype(str(tensor["dtype"])).newbyteorder("<")
    return np.frombuffer(raw, dtype=dtype).reshape([int(d) for d in tensor["shape"]]).copy()


class VectorRunner:
    """Executes vectors with ONNX Runtime on the CPU. Sessions are cached by model hash, vectors
    by their hash (``fetch(sha256) -> {"model": base64, "inputs": [...]}``), both bounded."""

    def __init__(self, fetch: Callable[[str], dict[str, Any]], *, cache_size: int = 256,
                 threads: int = 1) -> None:
        self._fetch = fetch
        self._vectors: OrderedDict[str, tuple[bytes, str, list[dict[str, Any]]]] = OrderedDict()
        self._sessions: OrderedDict[str, Any] = OrderedDict()  # a session, or the runtime's refusal (str)
        self._feeds: OrderedDict[str, dict[str, np.ndarray]] = OrderedDict()
        self._names: dict[str, list[str]] = {}  # output names per model hash
        self._options: Any = None
        self._cache_size = cache_size
        self._threads = threads
        self._lock = threading.Lock()
        self.fetched = 0

    def _vector(self, sha256: str, fetch: Callable[[str], dict[str, Any]] | None = None
                ) -> tuple[bytes, str, list[dict[str, Any]]]:
        with self._lock:
            hit = self._vectors.get(sha256)
            if hit is not None:
                self._vectors.move_to_end(sha256)
                return hit
        data = (fetch or self._fetch)(sha256)
        model = base64.b64decode(data["model"])
        entry = (model, hashlib.sha256(model).hexdigest(), list(data.get("inputs") or []))
        with self._lock:
            self.fetched += 1
            self._vectors[sha256] = entry
            while len(self._vectors) > self._cache_size:
                self._vectors.popitem(last=False)
        return entry

    def _session(self, model: bytes, key: str) -> Any:
        """The model's session (cached); a model the runtime refused raises its message again
        without loading it again (the same runtime refuses the same bytes)."""
        with self._lock:
            session = self._sessions.get(key)
            if session is not None:
                self._sessions.move_to_end(key)
        if isinstance(session, str):
            raise RuntimeError(session)
        if session is not None:
            return session
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self._threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        try:
            session = ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])
        except Exception as exc:
            session = str(exc)
        with self._lock:
            self._sessions[key] = session
            while len(self._sessions) > self._cache_size:
                self._sessions.popitem(last=False)
        if isinstance(session, str):
            raise RuntimeError(session)
        return session

    def _inputs(self, sha256: str, inputs: list[dict[str, Any]]) -> dict[str, np.ndarray]:
        with self._lock:
            feeds = self._feeds.get(sha256)
        if feeds is None:
            feeds = {t["name"]: decode(t) for t in inputs}
            with self._lock:
                self._feeds[sha256] = feeds
                while len(self._feeds) > self._cache_size:
                    self._feeds.popitem(last=False)
        return feeds

    def _run_options(self) -> Any:
        if self._options is None:
            import onnxruntime as ort

            options = ort.RunOptions()
            options.log_severity_level = 4  # a failing case is reported in its result, not logged as an error
            self._options = options
        return self._options

    def run_case(self, sha256: str, perturb: Callable[[list[np.ndarray]], list[np.ndarray]] | None = None
                 ) -> dict[str, Any]:
        """One vector: ``{"status": "ok", "outputs": [...], "ms": ...}`` or unsupported/error with
        the runtime's message. ``perturb`` (the fleet simulator's faults) changes the outputs after
        the run."""
        model, key, inputs = self._vector(sha256)
        try:
            session = self._session(model, key)
        except Exception as exc:  # the runtime refused the model: NOT_IMPLEMENTED, INVALID_GRAPH...
            return {"status": "unsupported", "message": str(exc)[:2000]}
        try:
            feeds = self._inputs(sha256, inputs)
            t0 = time.perf_counter()
            outputs = [np.asarray(o) for o in session.run(None, feeds, self._run_options())]
            ms = (time.perf_counter() - t0) * 1000
        except Exception as exc:  # loaded, then failed at run time
            return {"status": "error", "message": str(exc)[:2000]}
        if perturb is not None:
            outputs = perturb(outputs)
        names = self._names.get(key)
        if names is None:
            names = self._names[key] = [o.name for o in session.get_outputs()]
        return {"status": "ok", "ms": round(ms, 3),
                "outputs": [encode(o, n) for o, n in zip(outputs, names, strict=False)]}

    def run(self, args: dict[str, Any], perturb_for: Callable[[dict[str, Any]], Any] | None = None,
            fetch: Callable[[str], dict[str, Any]] | None = None) -> tuple[str, dict[str, Any]]:
        """A ``run_vectors`` command: ``args`` names the run, the module serial and the vectors
        (hash and operator). Succeeds when every case was attempted (whatever each produced);
        fails when the vectors could not be fetched. ``fetch`` overrides the runner's (the fleet
        simulator fetches with the key of the node it plays)."""
        vectors = args.get("vectors") or []
        started = time.perf_counter()
        cases: dict[str, Any] = {}
        fetch_ms = 0.0
        for v in vectors:
            sha = str(v.get("sha256") if isinstance(v, dict) else v)
            t0 = time.perf_counter()
            try:
                self._vector(sha, fetch)
            except Exception as exc:
                return "failed", {"message": f"could not fetch vector {sha[:12]}: {exc}", "module": args.get("module"),
                                  "run": args.get("run")}
            fetch_ms += (time.perf_counter() - t0) * 1000
            perturb = perturb_for(v) if perturb_for is not None and isinstance(v, dict) else None
            cases[sha] = self.run_case(sha, perturb)
        total_ms = (time.perf_counter() - started) * 1000
        counts: dict[str, int] = {}
        for c in cases.values():
            counts[c["status"]] = counts.get(c["status"], 0) + 1
        return "succeeded", {"run": args.get("run"), "module": args.get("module"), "cases": cases,
                             "fetch_ms": round(fetch_ms, 3), "total_ms": round(total_ms, 3),
                             "message": f"{len(cases)} vector(s) run: "
                                        + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))}
