"""Importing the onnx INT8 conformance cases, and the outcome of every one of them on the
pinned ONNX Runtime (1.32, CPU): measured, listed case by case."""

from __future__ import annotations

import base64
from io import StringIO
from typing import Any

import onnx
import onnxruntime
import pytest
from django.core.management import call_command

from agent.cp_agent.vectors import VectorRunner, decode
from apps.vectors import codec
from apps.vectors.choices import SuiteState
from apps.vectors.compare import ERROR, PASS, UNSUPPORTED, judge
from apps.vectors.models import Suite, Vector
from tests.vectors.conftest import int8_specs

# onnx 1.23.2 cases on ONNX Runtime 1.32.0, CPU execution provider.
EXPECTED = {
    "test_convinteger_without_padding": PASS,
    "test_convinteger_with_padding": ERROR,  # loads, then "Non per-tensor quantization is not supported now"
    "test_dequantizelinear": UNSUPPORTED,    # the opset-28 Quantize/DequantizeLinear: NOT_IMPLEMENTED
    "test_dequantizelinear_axis": UNSUPPORTED,
    "test_dequantizelinear_e4m3fn": UNSUPPORTED,
    "test_dequantizelinear_e4m3fn_float16": UNSUPPORTED,
    "test_dequantizelinear_e4m3fn_zero_point": UNSUPPORTED,
    "test_dequantizelinear_e5m2": UNSUPPORTED,
    "test_dequantizelinear_uint16": UNSUPPORTED,
    "test_dequantizelinear_int16": UNSUPPORTED,
    "test_dequantizelinear_uint4": UNSUPPORTED,
    "test_dequantizelinear_int4": UNSUPPORTED,
    "test_dequantizelinear_uint2": UNSUPPORTED,
    "test_dequantizelinear_int2": UNSUPPORTED,
    "test_dequantizelinear_float4e2m1": UNSUPPORTED,
    "test_dequantizelinear_blocked": UNSUPPORTED,
    "test_dynamicquantizelinear": PASS,
    "test_dynamicquantizelinear_expanded": PASS,
    "test_dynamicquantizelinear_max_adjusted": PASS,
    "test_dynamicquantizelinear_max_adjusted_expanded": PASS,
    "test_dynamicquantizelinear_min_adjusted": PASS,
    "test_dynamicquantizelinear_min_adjusted_expanded": PASS,
    "test_matmulinteger": PASS,
    "test_qlinearconv": PASS,
    "test_qlinearmatmul_2D_uint8_float32": PASS,
    "test_qlinearmatmul_3D_uint8_float32": PASS,
    "test_qlinearmatmul_2D_uint8_float16": PASS,
    "test_qlinearmatmul_3D_uint8_float16": PASS,
    "test_qlinearmatmul_2D_int8_float32": PASS,
    "test_qlinearmatmul_3D_int8_float32": PASS,
    "test_qlinearmatmul_2D_int8_float16": PASS,
    "test_qlinearmatmul_3D_int8_float16": PASS,
    "test_quantizelinear": UNSUPPORTED,
    "test_quantizelinear_axis": UNSUPPORTED,
    "test_quantizelinear_e4m3fn": UNSUPPORTED,
    "test_quantizelinear_e5m2": UNSUPPORTED,
    "test_quantizelinear_uint16": UNSUPPORTED,
    "test_quantizelinear_int16": UNSUPPORTED,
    "test_quantizelinear_uint4": UNSUPPORTED,
    "test_quantizelinear_int4": UNSUPPORTED,
    "test_quantizelinear_uint2": UNSUPPORTED,
    "test_quantizelinear_int2": UNSUPPORTED,
    "test_quantizelinear_float4e2m1": UNSUPPORTED,
    "test_quantizelinear_blocked_asymmetric": UNSUPPORTED,
    "test_quantizelinear_blocked_symmetric": UNSUPPORTED,
}


def test_the_pinned_versions_are_the_measured_ones() -> None:
    assert onnx.__version__ == "1.23.2"
    assert onnxruntime.__version__.startswith("1.32.")


def test_every_imported_case_has_its_measured_outcome_on_onnx_runtime() -> None:
    specs = {s.sha256: s for s in int8_specs()}
    runner = VectorRunner(lambda sha: {"model": base64.b64encode(specs[sha].model).decode(),
                                       "inputs": specs[sha].inputs})
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    for sha, spec in specs.items():
        case = runner.run_case(sha)
        outputs = [decode(o) for o in case.get("outputs", [])] if case["status"] == "ok" else None
        verdict = judge(expected=[(t["name"], codec.decode(t)) for t in spec.expected], tolerances=spec.tolerances,
                        status=case["status"], outputs=outputs, message=case.get("message", ""))
        outcomes[spec.name] = verdict.outcome
        messages[spec.name] = verdict.message

    assert outcomes == EXPECTED
    assert sum(o == PASS for o in outcomes.values()) == 17
    for name, outcome in outcomes.items():
        if outcome == UNSUPPORTED:
            assert "NOT_IMPLEMENTED" in messages[name], (name, messages[name])
            assert "(28)" in messages[name], (name, messages[name])  # the opset the runtime lacks
    assert "Non per-tensor quantization is not supported" in messages["test_convinteger_with_padding"]


@pytest.mark.django_db
def test_the_import_command_stores_a_published_suite_with_provenance_once() -> None:
    out = StringIO()
    call_command("vectors_import", "onnx-node", "--ops", "QLinearMatMul", "MatMulInteger", stdout=out)
    suite = Suite.objects.get(name="onnx-int8")
    assert suite.state == SuiteState.PUBLISHED and suite.published_at is not None
    assert suite.provenance == {"source": "onnx-node", "onnx_version": "1.23.2",
                                "operators": ["QLinearMatMul", "MatMulInteger"]}
    vectors = list(suite.vectors.all())
    assert sorted(v.name for v in vectors) == sorted(n for n in EXPECTED if n.startswith(("test_qlinearmatmul",
                                                                                         "test_matmulinteger")))
    v: Any = Vector.objects.get(name="test_qlinearmatmul_2D_int8_float32")
    assert v.operator == "QLinearMatMul" and v.opset == 21
    assert v.provenance["case"] == "test_qlinearmatmul_2D_int8_float32"
    assert v.provenance["onnx_version"] == "1.23.2"
    assert v.tolerances == [{"gate": ["exact_rate", "lsb"], "min_exact_rate": 1.0, "max_lsb": 0}]
    assert v.sha256 == codec.content_sha256(model=bytes(v.model), inputs=v.inputs, expected=v.expected,
                                            tolerances=v.tolerances)

    again = StringIO()
    call_command("vectors_import", "onnx-node", "--ops", "QLinearMatMul", "MatMulInteger", stdout=again)
    assert "already present" in again.getvalue()
    assert Suite.objects.filter(name="onnx-int8").count() == 1
    assert Vector.objects.count() == 9

    call_command("vectors_import", "onnx-node", stdout=StringIO())  # every INT8 operator: a new version
    latest = Suite.objects.filter(name="onnx-int8").order_by("-version").first()
    assert latest is not None and latest.version == 2 and latest.vectors.count() == len(EXPECTED)
    assert Vector.objects.count() == len(EXPECTED)  # the 9 already stored are shared, not copied
