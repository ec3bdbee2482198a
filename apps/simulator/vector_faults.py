"""The simulator's model of faulty vector outputs: what a regression-vector run on a simulated
module computes when a ``bad_combination`` fault names its driver and framework (an operator
drifts), or a ``silent_corruption`` fault strikes one module (float outputs nudged inside the
tolerance). Pure functions, used by the runner's simulated agents (``runner.py``); the traffic
engine (``engine.py``) knows nothing of them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from apps.simulator.specs import FaultSpec, ModuleSpec, NodeSpec, stable_random


def operator_error(module: ModuleSpec, operator: str, faults: Iterable[FaultSpec] = ()) -> float:
    """Relative error of ``operator`` on ``module`` against the float64 reference.

    INT8 quantisation noise (1e-5..5e-4, stable per module and operator), unless an enabled
    ``bad_combination`` fault names this module's driver and framework (and type, when given) and this
    operator: then the operator drifts by the fault's ``error`` (default 0.08). Pure: used by the
    regression-vector runner of the simulated backend.
    """
    noise = 1e-5 + 4.9e-4 * stable_random("opnoise", module.serial, operator.lower())
    for f in faults:
        if f.kind != "bad_combination":
            continue
        p = f.params
        if str(p.get("operator", "")).lower() != operator.lower():
            continue
        if p.get("driver") != module.driver_version or p.get("framework") != module.framework_version:
            continue
        if p.get("module_type") and module.module_type and p["module_type"] != module.module_type:
            continue
        error = float(p.get("error", 0.08))
        return error * (0.9 + 0.2 * stable_random("opdrift", module.serial, operator.lower()))
    return noise


def combination_drift(*, driver: str, framework: str, module_type: str, operator: str,
                      faults: Iterable[FaultSpec] = ()) -> float | None:
    """The relative error a ``bad_combination`` fault gives ``operator`` on modules running
    ``driver`` + ``framework`` (None: the combination is clean for it). A function of the
    combination alone, so healthy twins and struck twins each agree with one another."""
    for f in faults:
        if f.kind != "bad_combination":
            continue
        p = f.params
        if str(p.get("operator", "")).lower() != operator.lower():
            continue
        if p.get("driver") != driver or p.get("framework") != framework:
            continue
        if p.get("module_type") and module_type and p["module_type"] != module_type:
            continue
        return float(p.get("error", 0.08))
    return None


def perturb_outputs(outputs: list[Any], *, error: float, key: str) -> list[Any]:
    """Outputs as a bad combination computes them: a quarter of the elements (chosen by ``key``,
    deterministically) off by ``error`` of the dtype's range (at least 1 LSB) for integers, or
    by ``error`` relative for floats."""
    rng = np.random.default_rng(int(stable_random("perturb", key) * 2**32))
    out = []
    for o in outputs:
        a = np.array(o, copy=True)
        if a.size == 0:
            out.append(a)
            continue
        mask = rng.random(a.shape) < 0.25
        mask.flat[0] = True
        if a.dtype.kind in "iu":
            info = np.iinfo(a.dtype)
            span = min(float(info.max) - float(info.min), 255.0)
            delta = max(1, int(round(error * span)))
            shifted = a.astype(np.int64) + np.where(mask, delta, 0)
            over = shifted > info.max
            shifted = np.where(over, a.astype(np.int64) - delta, shifted)
            a = np.clip(shifted, info.min, info.max).astype(a.dtype)
        elif a.dtype.kind == "f":
            a = np.where(mask, a * (1 + error) + np.asarray(error, dtype=a.dtype), a).astype(a.dtype)
        out.append(a)
    return out


def silent_corruption(*, node: NodeSpec, serial: str, faults: Iterable[FaultSpec] = ()) -> float | None:
    """The relative change a ``silent_corruption`` fault gives the float outputs of ``serial``
    (None: the module is sound). It strikes one module of its node: the slot named, else the first."""
    for f in faults:
        if f.kind != "silent_corruption" or f.node != node.hostname or not node.modules:
            continue
        slot = f.params.get("slot")
        target = next((m for m in node.modules if m.slot == slot), None) if slot is not None else None
        target = target or min(node.modules, key=lambda m: m.slot)
        if target.serial == serial:
            return float(f.params.get("relative", 1e-5))
    return None


def scale_floats(outputs: list[Any], relative: float) -> list[Any]:
    """Float outputs times (1 + relative); integer outputs as they are."""
    return [(np.asarray(o) * (1 + relative)).astype(o.dtype) if np.asarray(o).dtype.kind == "f" else o
            for o in outputs]
