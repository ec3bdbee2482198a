"""Where vectors come from. Pure (no Django): each source yields ``VectorSpec``s.

``onnx-node``: the operator conformance cases that ship in the ``onnx`` package
(``onnx.backend.test.case.node.collect_testcases()``), those whose graph uses one of the
chosen operators. Provenance keeps the case name and the onnx version; integer outputs are
exact, float outputs use the case's own rtol/atol.
"""

from __future__ import annotations

import hashlib
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from apps.vectors import codec
from apps.vectors.compare import default_tolerance

# The INT8 operators (and their quantise/dequantise neighbours) of the onnx conformance cases.
INT8_OPERATORS = ("QLinearMatMul", "QLinearConv", "MatMulInteger", "ConvInteger", "QuantizeLinear",
                  "DequantizeLinear", "DynamicQuantizeLinear")


@dataclass
class VectorSpec:
    name: str
    operator: str
    opset: int
    model: bytes
    inputs: list[dict[str, Any]]
    expected: list[dict[str, Any]]
    tolerances: list[dict[str, Any]]
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        return codec.content_sha256(model=self.model, inputs=self.inputs, expected=self.expected,
                                    tolerances=self.tolerances)


def _array(value: Any) -> np.ndarray:
    from onnx import TensorProto, numpy_helper  # lazy: onnx takes ~0.5 s to load; web and workers skip it

    if isinstance(value, TensorProto):
        return np.asarray(numpy_helper.to_array(value))
    return np.asarray(value)


def _operator(op_types: list[str], wanted: Iterable[str]) -> str | None:
    """The wanted operator a graph exercises: the first wanted one in node order."""
    wanted_lower = {w.lower(): w for w in wanted}
    for op in op_types:
        if op.lower() in wanted_lower:
            return op
    return None


def onnx_node_cases(operators: Iterable[str] = INT8_OPERATORS) -> Iterator[VectorSpec]:
    """The onnx package's node cases using one of ``operators``: one vector per data set."""
    import onnx  # lazy: onnx takes ~0.5 s to load; web and workers skip it
    from onnx.backend.test.case.node import collect_testcases  # (same)

    ops = list(operators)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators overflow casts on purpose
        cases = collect_testcases(None)
    for case in cases:
        if case.model is None:
            continue
        graph = case.model.graph
        operator = _operator([n.op_type for n in graph.node], ops)
        if operator is None:
            continue
        initialisers = {i.name for i in graph.initializer}
        input_names = [i.name for i in graph.input if i.name not in initialisers]
        output_names = [o.name for o in graph.output]
        opset = next((o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx")), 0)
        model = case.model.SerializeToString()
        data_sets = list(case.data_sets or [])
        for k, (inputs, outputs) in enumerate(data_sets):
            enc_in = [codec.encode(_array(v), name) for name, v in zip(input_names, inputs, strict=False)]
            enc_out = [codec.encode(_array(v), name) for name, v in zip(output_names, outputs, strict=False)]
            tolerances = [default_tolerance(o["dtype"], rtol=float(case.rtol), atol=float(case.atol))
                          for o in enc_out]
            name = case.name if len(data_sets) == 1 else f"{case.name}[{k}]"
            yield VectorSpec(
                name=name, operator=operator, opset=int(opset), model=model, inputs=enc_in, expected=enc_out,
                tolerances=tolerances,
                provenance={"source": "onnx-node", "case": case.name, "data_set": k,
                            "onnx_version": onnx.__version__,
                            "operators": sorted({n.op_type for n in graph.node})},
            )


def _mlp(seed: int) -> Any:
    """A small float model: 16 inputs, a hidden layer of 32 with ReLU, 10 logits."""
    from onnx import TensorProto, helper, numpy_helper  # lazy: onnx takes ~0.5 s to load; web and workers skip it

    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((16, 32)) * 0.4).astype(np.float32)
    b1 = (rng.standard_normal(32) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((32, 10)) * 0.4).astype(np.float32)
    b2 = (rng.standard_normal(10) * 0.1).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h0"]), helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h"]), helper.make_node("MatMul", ["h", "W2"], ["y0"]),
             helper.make_node("Add", ["y0", "b2"], ["y"])]
    graph = helper.make_graph(
        nodes, "mlp16", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
        initializer=[numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(b1, "b1"),
                     numpy_helper.from_array(w2, "W2"), numpy_helper.from_array(b2, "b2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="controlplane")
    model.ir_version = 8
    return model


# Model-level gates: measured on ONNX Runtime 1.32 (CPU) the quantised model is within 0.18 of
# the float logits and agrees on the top-1 class for 63 of 64 inputs; the gates leave room for
# another correct INT8 kernel and catch a combination that drifts end to end.
MODEL_TOLERANCE = {"gate": ["max_abs", "top1", "cosine"], "max_abs_error": 0.5, "min_top1": 0.95,
                   "min_cosine": 0.999}


def model_int8_cases(seed: int = 12, batch: int = 64) -> Iterator[VectorSpec]:
    """A small float model quantised to INT8 with ``onnxruntime.quantization`` (static, QOperator:
    QLinearMatMul and QLinearAdd), judged against the float model's own outputs on a fixed input set."""
    import onnx  # lazy: onnx takes ~0.5 s to load; web and workers skip it
    import onnxruntime as ort  # (same)
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static  # (same)

    rng = np.random.default_rng(seed + 1)
    x = rng.standard_normal((batch, 16)).astype(np.float32)
    float_model = _mlp(seed)

    class Calibration(CalibrationDataReader):
        def __init__(self) -> None:
            self._batches = iter([{"x": x[i:i + 8]} for i in range(0, batch, 8)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._batches, None)

    with tempfile.TemporaryDirectory() as tmp:
        fp, qp = Path(tmp) / "float.onnx", Path(tmp) / "int8.onnx"
        onnx.save(float_model, str(fp))
        quantize_static(str(fp), str(qp), Calibration(), quant_format=QuantFormat.QOperator,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        quantised = qp.read_bytes()
    session = ort.InferenceSession(float_model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": x})[0]
    float_bytes = float_model.SerializeToString()
    yield VectorSpec(
        name="model_mlp16_int8_static", operator="QLinearMatMul", opset=13, model=quantised,
        inputs=[codec.encode(x, "x")], expected=[codec.encode(expected, "y")], tolerances=[dict(MODEL_TOLERANCE)],
        provenance={"source": "model-int8", "model": "mlp16 (16-32-10, ReLU)", "seed": seed, "inputs": batch,
                    "quantiser": "onnxruntime.quantization.quantize_static (QOperator, U8 activations, S8 weights)",
                    "onnxruntime_version": ort.__version__,
                    "float_model_sha256": hashlib.sha256(float_bytes).hexdigest(),
                    "expected": "the float model's outputs"},
    )
