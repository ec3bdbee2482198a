"""Model-level vectors: a small float model quantised to INT8 with onnxruntime.quantization,
judged against the float model's outputs (max abs error, top-1 agreement, cosine)."""

from __future__ import annotations

import base64
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command

from agent.cp_agent.vectors import VectorRunner, decode
from apps.simulator.vector_faults import perturb_outputs
from apps.vectors import codec
from apps.vectors.compare import FAIL, PASS, judge
from apps.vectors.models import Suite
from apps.vectors.sources import model_int8_cases


def _verdict(perturb: object = None) -> object:
    spec = next(model_int8_cases())
    runner = VectorRunner(lambda sha: {"model": base64.b64encode(spec.model).decode(), "inputs": spec.inputs})
    case = runner.run_case(spec.sha256, perturb)  # type: ignore[arg-type]
    assert case["status"] == "ok", case
    return judge(expected=[("y", codec.decode(spec.expected[0]))], tolerances=spec.tolerances, status="ok",
                 outputs=[decode(o) for o in case["outputs"]])


def test_the_quantised_model_stays_close_to_its_float_outputs() -> None:
    verdict = _verdict()
    assert verdict.outcome == PASS, verdict.message  # type: ignore[attr-defined]
    figures = verdict.outputs[0]  # type: ignore[attr-defined]
    assert 0.05 < figures["max_abs_error"] < 0.5  # measured 0.18: quantised, not bit-exact
    assert figures["top1_agreement"] >= 0.95 and figures["cosine"] > 0.999


def test_a_combination_drifting_end_to_end_fails_it() -> None:
    verdict = _verdict(lambda outs: perturb_outputs(outs, error=0.08, key="drift"))
    assert verdict.outcome == FAIL  # type: ignore[attr-defined]
    assert "max_abs" in verdict.outputs[0]["failed_gates"]  # type: ignore[attr-defined]


@pytest.mark.django_db
def test_the_import_command_stores_the_model_level_suite_with_provenance() -> None:
    call_command("vectors_import", "model-int8", stdout=StringIO())
    suite = Suite.objects.get(name="model-int8")
    vector = suite.vectors.get()
    assert vector.operator == "QLinearMatMul" and vector.tolerances[0]["gate"] == ["max_abs", "top1", "cosine"]
    assert vector.provenance["source"] == "model-int8" and vector.provenance["onnxruntime_version"].startswith("1.32")
    inputs = codec.decode(vector.inputs[0])
    assert inputs.shape == (64, 16) and inputs.dtype == np.float32
