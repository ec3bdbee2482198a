"""Uploading a vector (multipart): checked file by file, 400 naming the file and field, nothing stored."""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from agent.cp_agent.backends import build_qlinear_matmul
from apps.vectors.models import Suite, Vector

pytestmark = pytest.mark.django_db
URL = "/api/v1/vector-suites/upload/"
Y0 = np.zeros((16, 64), np.uint8)
TOL = json.dumps({"y": {"gate": ["lsb"], "max_lsb": 1}})


def _npz(**arrays: Any) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _files(*, model: bytes | None = None, a: Any = None, y: Any = None, tolerances: str = TOL) -> dict[str, Any]:
    model = build_qlinear_matmul() if model is None else model
    a = np.random.default_rng(3).integers(0, 255, size=(16, 64), dtype=np.uint8) if a is None else a
    if y is None:
        y = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]
    return {"suite": "uploaded", "name": "matmul-16x64", "tolerances": tolerances,
            "model": SimpleUploadedFile("matmul.onnx", model),
            "inputs": SimpleUploadedFile("inputs.npz", _npz(a=a)),
            "expected": SimpleUploadedFile("expected.npz", _npz(y=y))}


def test_an_upload_goes_into_a_draft_that_is_then_published(operator_api) -> None:  # type: ignore[no-untyped-def]
    response = operator_api.post(URL, _files(), format="multipart")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["suite"]["state"] == "draft" and body["suite"]["vector_count"] == 1
    assert body["vector"]["operator"] == "QLinearMatMul" and body["vector"]["provenance"]["source"] == "upload"
    suite_id = body["suite"]["id"]
    published = operator_api.post(f"/api/v1/vector-suites/{suite_id}/publish/")
    assert published.status_code == 200 and published.json()["state"] == "published"
    again = operator_api.post(URL, _files(), format="multipart")  # the published version stays as it is
    assert again.status_code == 201 and again.json()["suite"]["version"] == 2
    assert Vector.objects.count() == 1  # the same content is the same vector


@pytest.mark.parametrize("files, field, message", [
    (lambda: _files(model=b"not onnx", y=Y0), "model", "model (matmul.onnx): not a valid ONNX model"),
    (lambda: _files(a=np.zeros((16, 64), np.float32), y=Y0), "inputs", "inputs (inputs.npz): a is float32, the model's "
                                                                   "is uint8"),
    (lambda: _files(a=np.zeros((8, 64), np.uint8), y=Y0), "inputs", "inputs (inputs.npz): a has shape [8, 64], the "
                                                               "model's is [16, 64]"),
    (lambda: _files(tolerances="{}"), "tolerances", "tolerances: y: missing (every output needs one)"),
    (lambda: _files(tolerances='{"y": {"gate": ["ulp"]}}'), "tolerances",
     "tolerances: y: gate: ulp applies to floats, this output is uint8"),
])
def test_a_bad_upload_is_refused_naming_file_and_field_and_stores_nothing(operator_api, files, field,  # type: ignore[no-untyped-def]
                                                                          message) -> None:
    response = operator_api.post(URL, files(), format="multipart")
    assert response.status_code == 400
    assert any(m.startswith(message) for m in response.json()["errors"][field]), response.json()
    assert not Suite.objects.exists() and not Vector.objects.exists()


def test_viewers_cannot_upload(viewer_api) -> None:  # type: ignore[no-untyped-def]
    assert viewer_api.post(URL, _files(), format="multipart").status_code == 403
