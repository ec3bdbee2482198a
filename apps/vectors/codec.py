"""Tensors on the wire and in the database: ``{"name", "dtype", "shape", "data"}`` with
``data`` the raw little-endian bytes, zlib-compressed, base64. Compact (an INT8 tensor
is about its own size) and exact (no float formatting). The standalone agent speaks the
same format (agent/cp_agent/vectors.py); keep the two in step."""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from typing import Any

import ml_dtypes  # noqa: F401  (registers the low-precision dtypes below with numpy)
import numpy as np

# dtypes a vector's tensors may have (numpy names): what ONNX Runtime takes and returns on the CPU,
# and the low-precision types of the onnx cases (ml_dtypes; one byte per element).
DTYPES = frozenset({"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                    "float16", "float32", "float64", "bool", "bfloat16", "float8_e4m3fn", "float8_e5m2",
                    "float4_e2m1fn", "int4", "uint4", "int2", "uint2"})
INTEGER_DTYPES = frozenset({"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bool",
                            "int4", "uint4", "int2", "uint2"})


class TensorError(ValueError):
    """A tensor that cannot be decoded; the message names what is wrong."""


def encode(array: Any, name: str = "") -> dict[str, Any]:
    a = np.asarray(array)  # not ascontiguousarray: it makes a scalar (shape []) shape [1]
    dtype = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
    a = a.astype(dtype, copy=False)
    if a.dtype.name not in DTYPES:
        raise TensorError(f"tensor {name!r}: dtype {a.dtype.name} is not supported ({', '.join(sorted(DTYPES))})")
    return {"name": name, "dtype": a.dtype.name, "shape": list(a.shape),
            "data": base64.b64encode(zlib.compress(a.tobytes(), 1)).decode("ascii")}


def decode(tensor: Any, where: str = "tensor") -> np.ndarray:
    if not isinstance(tensor, dict):
        raise TensorError(f"{where}: expected an object with dtype, shape and data")
    dtype, shape, data = tensor.get("dtype"), tensor.get("shape"), tensor.get("data")
    if dtype not in DTYPES:
        raise TensorError(f"{where}: dtype {dtype!r} is not one of {', '.join(sorted(DTYPES))}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise TensorError(f"{where}: shape must be a list of non-negative integers")
    if not isinstance(data, str):
        raise TensorError(f"{where}: data must be base64 text")
    try:
        raw = zlib.decompress(base64.b64decode(data, validate=True))
    except (ValueError, zlib.error) as exc:
        raise TensorError(f"{where}: data is not base64 of zlib-compressed bytes ({exc})") from None
    expected = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    if len(raw) != expected:
        raise TensorError(f"{where}: {len(raw)} bytes for shape {shape} of {dtype} (expected {expected})")
    return np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape).copy()


def content_sha256(*, model: bytes, inputs: list[dict[str, Any]], expected: list[dict[str, Any]],
                   tolerances: list[dict[str, Any]]) -> str:
    """A vector's address: the hash of everything it is (model, inputs, expected outputs, tolerances)."""
    h = hashlib.sha256()
    h.update(hashlib.sha256(model).digest())
    h.update(json.dumps({"inputs": inputs, "expected": expected, "tolerances": tolerances},
                        sort_keys=True, separators=(",", ":")).encode())
    return h.hexdigest()


def outputs_digest(outputs: list[np.ndarray]) -> str:
    """sha256 of outputs, bit for bit (dtype, shape and bytes of each): equal outputs, equal digests."""
    h = hashlib.sha256()
    for a in outputs:
        h.update(f"{a.dtype.name}{list(a.shape)}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()
