"""The agent is a program of its own: no Django, its own entry point, a real INT8 reference backend."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from agent.cp_agent.backends import ReferenceBackend, build_qlinear_matmul
from controlplane.engines import BASE_DIR
from tests.live.stack import wait_for


def test_it_runs_without_importing_django() -> None:
    code = ("import sys, agent.cp_agent.__main__, agent.cp_agent.runner, agent.cp_agent.backends; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'django', 'rest_framework', 'apps', "
            "'controlplane'}); print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=BASE_DIR, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_it_has_an_entry_point_that_needs_the_api_and_a_token() -> None:
    done = subprocess.run([sys.executable, "-m", "agent.cp_agent", "--node", "n-1"], cwd=BASE_DIR,
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 2
    assert "--api and --token" in done.stderr


def test_its_reference_backend_runs_int8_matmul_on_onnx_runtime() -> None:
    backend = ReferenceBackend(serial="ref-0", rate=200.0)
    try:
        wait_for(lambda: backend.inferences > 20, timeout=30, what="the backend to run 20 inferences")
        (metrics,) = backend.read()
        assert 0 < metrics["util"] <= 1
        assert metrics["link_width"] == metrics["link_width_expected"]

        model = build_qlinear_matmul(m=2, k=64, n=64)
        a = np.full((2, 64), 130, dtype=np.uint8)
        (y,) = backend.run_vector(model, {"a": a})
        # Reference in float64: dequantise, multiply, requantise (scales 0.02/0.02 -> 0.5, zero points 128).
        from onnx import load_from_string, numpy_helper

        b = next(numpy_helper.to_array(t) for t in load_from_string(model).graph.initializer if t.name == "b")
        real = ((a.astype(np.float64) - 128) * 0.02) @ ((b.astype(np.float64) - 128) * 0.02)
        expected = np.clip(np.rint(real / 0.5) + 128, 0, 255)
        assert y.dtype == np.uint8 and y.shape == (2, 64)
        assert np.max(np.abs(y.astype(np.int64) - expected)) <= 1
    finally:
        backend.close()
