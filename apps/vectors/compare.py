"""Judging a vector's outputs: pure functions, no Django (the benchmark uses them too).

Outcomes are defined once, here:

- ``pass``: it ran and every output is inside the vector's gates;
- ``fail``: it ran, and an output is outside a gate (or has the wrong dtype or shape);
- ``unsupported``: the runtime refused to load the model (e.g. NOT_IMPLEMENTED for an
  operator version it lacks), with the runtime's message;
- ``error``: it loaded, then failed at run time, with the runtime's message.

Every output is reported in full whatever gates it: max abs error, mismatching elements and
the worst index, cosine similarity and SQNR for all dtypes; the exact-match rate and the
largest difference in LSB for integers; the largest error in ULP and the share inside
``rtol``/``atol`` for floats. A tolerance says which of these gate (``gate``) and the bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

PASS, FAIL, UNSUPPORTED, ERROR = "pass", "fail", "unsupported", "error"
OUTCOMES = (PASS, FAIL, UNSUPPORTED, ERROR)

# Gates and the bound each reads from a tolerance (with its default).
GATES: dict[str, tuple[str, float]] = {
    "exact_rate": ("min_exact_rate", 1.0),   # integers: share of elements equal
    "lsb": ("max_lsb", 0.0),                 # integers: largest difference in LSB
    "allclose": ("rtol", 1e-3),              # floats: |out - exp| <= atol + rtol * |exp| everywhere (atol too)
    "ulp": ("max_ulp", 0.0),                 # floats: largest error in units in the last place
    "cosine": ("min_cosine", 0.999),         # any: cosine similarity of out and expected
    "sqnr": ("min_sqnr_db", 40.0),           # any: signal-to-quantisation-noise ratio in dB
    "max_abs": ("max_abs_error", 0.0),       # any: largest absolute error (model-level vectors)
    "top1": ("min_top1", 0.99),              # floats, 2-D or more: share of rows whose arg-max agrees
}
INT_GATES = frozenset({"exact_rate", "lsb"})
FLOAT_GATES = frozenset({"allclose", "ulp", "top1"})


def is_integer(dtype: Any) -> bool:
    name = np.dtype(dtype).name
    return name in ("bool", "int4", "uint4", "int2", "uint2") or np.dtype(dtype).kind in "iub"


def default_tolerance(dtype: str, *, rtol: float = 1e-3, atol: float = 1e-7) -> dict[str, Any]:
    """Exact for integers (every element equal, 0 LSB); ``rtol``/``atol`` for floats."""
    if is_integer(dtype):
        return {"gate": ["exact_rate", "lsb"], "min_exact_rate": 1.0, "max_lsb": 0}
    return {"gate": ["allclose"], "rtol": rtol, "atol": atol}


def check_tolerance(tolerance: Any, dtype: str) -> list[str]:
    """What is wrong with a tolerance for an output of ``dtype`` (empty when it is fine)."""
    if not isinstance(tolerance, dict):
        return ["must be an object with gate and its bounds"]
    gates = tolerance.get("gate")
    if not isinstance(gates, list) or not gates:
        return ["gate: name at least one of " + ", ".join(GATES)]
    problems = []
    is_int = is_integer(dtype)
    for g in gates:
        if g not in GATES:
            problems.append(f"gate: unknown gate {g!r} (one of {', '.join(GATES)})")
        elif is_int and g in FLOAT_GATES:
            problems.append(f"gate: {g} applies to floats, this output is {dtype}")
        elif not is_int and g in INT_GATES:
            problems.append(f"gate: {g} applies to integers, this output is {dtype}")
    for key in ("min_exact_rate", "max_lsb", "rtol", "atol", "max_ulp", "min_cosine", "min_sqnr_db",
                "max_abs_error", "min_top1"):
        if key in tolerance and not isinstance(tolerance[key], (int, float)):
            problems.append(f"{key}: must be a number")
    return problems


def _json_float(x: float, digits: int = 6) -> float | str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return round(float(x), digits)


def _ulp_ints(a: np.ndarray) -> np.ndarray:
    """Floats as integers ordered like the floats, so a difference counts ULPs."""
    kind = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    i = a.view(kind).astype(np.int64)
    sign_min = np.int64(-(2 ** (8 * a.dtype.itemsize - 1)))
    return np.where(i < 0, sign_min - i, i)


@dataclass
class OutputReport:
    name: str
    passed: bool
    metrics: dict[str, Any]
    failed_gates: list[str] = field(default_factory=list)
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "failed_gates": self.failed_gates,
                "message": self.message, **self.metrics}


def compare_output(actual: np.ndarray, expected: np.ndarray, tolerance: dict[str, Any], name: str = ""
                   ) -> OutputReport:
    """Every figure of ``actual`` against ``expected``, and whether the tolerance's gates hold."""
    if actual.dtype != expected.dtype:
        return OutputReport(name, False, {"dtype": str(actual.dtype), "expected_dtype": str(expected.dtype)},
                            ["dtype"], f"{name}: dtype {actual.dtype}, expected {expected.dtype}")
    if actual.shape != expected.shape:
        return OutputReport(name, False, {"shape": list(actual.shape), "expected_shape": list(expected.shape)},
                            ["shape"], f"{name}: shape {list(actual.shape)}, expected {list(expected.shape)}")
    is_int = is_integer(expected.dtype)
    a64 = actual.astype(np.float64)
    e64 = expected.astype(np.float64)
    both_nan = np.isnan(a64) & np.isnan(e64)
    diff = np.where(both_nan, 0.0, np.abs(a64 - e64))
    diff = np.where(np.isnan(diff), np.inf, diff)
    n = int(expected.size)
    equal = (actual == expected) | both_nan
    mismatches = int(n - int(np.count_nonzero(equal)))
    max_abs = float(diff.max()) if n else 0.0
    worst = [int(i) for i in np.unravel_index(int(diff.argmax()), expected.shape)] if n and mismatches else []
    finite = np.isfinite(a64) & np.isfinite(e64)
    af, ef = a64[finite], e64[finite]
    na, ne = float(np.linalg.norm(af)), float(np.linalg.norm(ef))
    if na == 0.0 and ne == 0.0:
        cosine = 1.0
    elif na == 0.0 or ne == 0.0:
        cosine = 0.0
    else:
        cosine = float(np.dot(af, ef) / (na * ne))
    noise = float(np.sum((af - ef) ** 2))
    signal = float(np.sum(ef ** 2))
    sqnr = math.inf if noise == 0.0 else (-math.inf if signal == 0.0 else 10.0 * math.log10(signal / noise))
    metrics: dict[str, Any] = {
        "dtype": expected.dtype.name, "shape": list(expected.shape), "elements": n,
        "max_abs_error": _json_float(max_abs), "mismatches": mismatches, "worst_index": worst,
        "cosine": _json_float(cosine, 9), "sqnr_db": _json_float(sqnr, 3),
    }
    if is_int:
        metrics["exact_match_rate"] = round(1.0 - mismatches / n, 6) if n else 1.0
        metrics["max_lsb_diff"] = int(max_abs) if math.isfinite(max_abs) else "inf"
    else:
        rtol = float(tolerance.get("rtol", 1e-3))
        atol = float(tolerance.get("atol", 1e-7))
        inside = np.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=True)
        metrics["within_rtol_atol"] = round(float(np.count_nonzero(inside)) / n, 6) if n else 1.0
        metrics["rtol"], metrics["atol"] = rtol, atol
        if expected.dtype.name in ("float16", "float32", "float64") and n:
            ua, ue = _ulp_ints(actual), _ulp_ints(expected)
            ulps = np.abs(ua.astype(np.float64) - ue.astype(np.float64))  # float64: no int64 overflow
            ulps = np.where(both_nan, 0.0, ulps)
            metrics["max_ulp"] = int(ulps.max())
        else:  # low-precision floats: the largest error in units of the expected value's last place
            metrics["max_ulp"] = None
        if expected.ndim >= 2 and n:
            agree = np.argmax(a64, axis=-1) == np.argmax(e64, axis=-1)
            metrics["top1_agreement"] = round(float(np.mean(agree)), 6)
    failed: list[str] = []
    for gate in tolerance.get("gate") or []:
        key, default = GATES.get(gate, ("", 0.0))
        bound = float(tolerance.get(key, default))
        ok = True
        if gate == "exact_rate":
            ok = metrics.get("exact_match_rate", 1.0) >= bound
        elif gate == "lsb":
            ok = math.isfinite(max_abs) and max_abs <= bound
        elif gate == "allclose":
            ok = metrics.get("within_rtol_atol", 1.0) >= 1.0
        elif gate == "ulp":
            ulp = metrics.get("max_ulp")
            ok = ulp is not None and ulp <= bound
        elif gate == "cosine":
            ok = cosine >= bound
        elif gate == "sqnr":
            ok = sqnr >= bound
        elif gate == "max_abs":
            ok = max_abs <= bound
        elif gate == "top1":
            top1 = metrics.get("top1_agreement")
            ok = top1 is not None and top1 >= bound
        if not ok:
            failed.append(gate)
    message = ""
    if failed:
        message = (f"{name}: outside {', '.join(failed)}: max abs error {metrics['max_abs_error']}, "
                   f"{mismatches} of {n} element(s) differ, worst at {worst}")
    return OutputReport(name, not failed, metrics, failed, message)


@dataclass
class CaseVerdict:
    outcome: str
    message: str
    outputs: list[dict[str, Any]]

    @property
    def max_abs_error(self) -> float | None:
        errs = [o.get("max_abs_error") for o in self.outputs]
        nums = [e for e in errs if isinstance(e, (int, float))]
        if any(e == "inf" for e in errs):
            return math.inf
        return max(nums) if nums else None


def judge(*, expected: list[tuple[str, np.ndarray]], tolerances: list[dict[str, Any]],
          status: str, outputs: list[np.ndarray] | None, message: str = "") -> CaseVerdict:
    """The outcome of one case from what the agent sent back: ``status`` ``ok`` with ``outputs``,
    or ``unsupported``/``error`` with the runtime's ``message``. The agent's own opinion of its
    outputs is never asked."""
    if status == UNSUPPORTED:
        return CaseVerdict(UNSUPPORTED, message or "the runtime refused the model", [])
    if status != "ok":
        return CaseVerdict(ERROR, message or f"the agent reported {status!r}", [])
    outputs = outputs or []
    if len(outputs) != len(expected):
        return CaseVerdict(FAIL, f"{len(outputs)} output(s) returned, {len(expected)} expected", [])
    reports = [compare_output(out, exp, tol, name)
               for out, (name, exp), tol in zip(outputs, expected, tolerances, strict=True)]
    failing = [r.message for r in reports if not r.passed]
    return CaseVerdict(FAIL if failing else PASS, "; ".join(failing), [r.as_dict() for r in reports])
