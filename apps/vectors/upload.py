"""A vector from uploaded files: an ONNX model, its inputs and expected outputs (.npz keyed by
tensor name, or one ONNX TensorProto .pb per file) and a tolerance per output (JSON). Every
problem is reported by file and field; nothing is stored unless all of it is right."""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np

from apps.vectors import codec
from apps.vectors.compare import check_tolerance
from apps.vectors.sources import VectorSpec


class UploadInvalid(ValueError):
    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{k}: {m}" for k, v in errors.items() for m in v))
        self.errors = errors


def _tensors(data: bytes, filename: str, field: str, errors: dict[str, list[str]]) -> dict[str, np.ndarray]:
    where = f"{field} ({filename})"
    if filename.endswith(".pb"):
        from onnx import TensorProto, numpy_helper  # lazy: onnx takes ~0.5 s to load; web and workers skip it

        proto = TensorProto()
        try:
            proto.ParseFromString(data)
            array = np.asarray(numpy_helper.to_array(proto))
        except Exception as exc:
            errors.setdefault(field, []).append(f"{where}: not an ONNX TensorProto ({exc})")
            return {}
        if not proto.name:
            errors.setdefault(field, []).append(f"{where}: the TensorProto has no name")
            return {}
        return {proto.name: array}
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            return {name: np.asarray(npz[name]) for name in npz.files}
    except Exception as exc:
        errors.setdefault(field, []).append(f"{where}: not a .npz of arrays ({type(exc).__name__}: {exc})")
        return {}


def _np_dtype(elem_type: int) -> str:
    from onnx import helper  # lazy: onnx takes ~0.5 s to load; web and workers skip it

    return str(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name)


def _check(declared: list[Any], got: dict[str, np.ndarray], field: str, filename: str,
           errors: dict[str, list[str]]) -> None:
    names = [d.name for d in declared]
    for d in declared:
        array = got.get(d.name)
        if array is None:
            errors.setdefault(field, []).append(f"{field} ({filename}): no tensor {d.name!r} (the model's "
                                                f"{'inputs' if field == 'inputs' else 'outputs'}: {', '.join(names)})")
            continue
        want = _np_dtype(d.type.tensor_type.elem_type)
        if array.dtype.name != want:
            errors.setdefault(field, []).append(f"{field} ({filename}): {d.name} is {array.dtype.name}, "
                                                f"the model's is {want}")
        dims = [x.dim_value if x.HasField("dim_value") else None for x in d.type.tensor_type.shape.dim]
        if len(dims) != array.ndim or any(w is not None and w != g for w, g in zip(dims, array.shape, strict=False)):
            shown = ["?" if w is None else w for w in dims]
            errors.setdefault(field, []).append(f"{field} ({filename}): {d.name} has shape {list(array.shape)}, "
                                                f"the model's is {shown}")
    extra = sorted(set(got) - set(names))
    if extra:
        errors.setdefault(field, []).append(f"{field} ({filename}): {', '.join(extra)} not in the model")


def vector_from_upload(*, name: str, model: bytes, model_filename: str, inputs: bytes, inputs_filename: str,
                       expected: bytes, expected_filename: str, tolerances: str, operator: str = "") -> VectorSpec:
    """Check everything and build the vector; raises UploadInvalid naming each problem."""
    import onnx  # lazy: onnx takes ~0.5 s to load; web and workers skip it

    errors: dict[str, list[str]] = {}
    try:
        proto = onnx.load_from_string(model)
        onnx.checker.check_model(proto)
    except Exception as exc:
        raise UploadInvalid({"model": [f"model ({model_filename}): not a valid ONNX model ({exc})"[:600]]}) from None
    graph = proto.graph
    initialisers = {i.name for i in graph.initializer}
    declared_in = [i for i in graph.input if i.name not in initialisers]
    ins = _tensors(inputs, inputs_filename, "inputs", errors)
    outs = _tensors(expected, expected_filename, "expected", errors)
    if ins:
        _check(declared_in, ins, "inputs", inputs_filename, errors)
    if outs:
        _check(list(graph.output), outs, "expected", expected_filename, errors)
    try:
        tol = json.loads(tolerances or "null")
    except ValueError as exc:
        tol = None
        errors.setdefault("tolerances", []).append(f"tolerances: not JSON ({exc})")
    if not isinstance(tol, dict):
        errors.setdefault("tolerances", []).append(
            'tolerances: an object of output name to tolerance, e.g. {"y": {"gate": ["lsb"], "max_lsb": 1}}')
        tol = {}
    for o in graph.output:
        if o.name not in tol:
            errors.setdefault("tolerances", []).append(f"tolerances: {o.name}: missing (every output needs one)")
            continue
        dtype = _np_dtype(o.type.tensor_type.elem_type)
        for problem in check_tolerance(tol[o.name], dtype):
            errors.setdefault("tolerances", []).append(f"tolerances: {o.name}: {problem}")
    if errors:
        raise UploadInvalid(errors)
    op = operator or (graph.node[0].op_type if graph.node else "")
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    return VectorSpec(
        name=name, operator=op, opset=int(opset), model=model,
        inputs=[codec.encode(ins[i.name], i.name) for i in declared_in],
        expected=[codec.encode(outs[o.name], o.name) for o in graph.output],
        tolerances=[tol[o.name] for o in graph.output],
        provenance={"source": "upload", "files": {"model": model_filename, "inputs": inputs_filename,
                                                  "expected": expected_filename}},
    )
