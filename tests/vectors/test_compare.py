"""The comparison: every figure reported, only the declared gates decide."""

from __future__ import annotations

import numpy as np

from apps.vectors.compare import (
    ERROR,
    FAIL,
    PASS,
    UNSUPPORTED,
    check_tolerance,
    compare_output,
    default_tolerance,
    judge,
)


def test_integers_report_exact_rate_and_lsb_and_pass_at_one_lsb_only_where_declared() -> None:
    expected = np.array([[10, 20], [30, 40]], dtype=np.uint8)
    actual = np.array([[10, 21], [30, 40]], dtype=np.uint8)
    exact = compare_output(actual, expected, default_tolerance("uint8"), "y")
    assert not exact.passed and exact.failed_gates == ["exact_rate", "lsb"]
    assert exact.metrics["exact_match_rate"] == 0.75 and exact.metrics["max_lsb_diff"] == 1
    assert exact.metrics["mismatches"] == 1 and exact.metrics["worst_index"] == [0, 1]
    assert "outside exact_rate, lsb" in exact.message
    one_lsb = compare_output(actual, expected, {"gate": ["lsb"], "max_lsb": 1}, "y")
    assert one_lsb.passed and one_lsb.metrics["max_lsb_diff"] == 1
    assert 0.99 < one_lsb.metrics["cosine"] < 1.0 and one_lsb.metrics["sqnr_db"] > 30


def test_floats_report_ulp_and_rtol_atol() -> None:
    expected = np.array([1.0, 2.0, -3.0], dtype=np.float32)
    actual = expected.copy()
    actual[2] = np.nextafter(np.float32(-3.0), np.float32(0), dtype=np.float32)
    actual[2] = np.nextafter(actual[2], np.float32(0), dtype=np.float32)
    report = compare_output(actual, expected, {"gate": ["ulp"], "max_ulp": 1}, "y")
    assert report.metrics["max_ulp"] == 2 and not report.passed and report.failed_gates == ["ulp"]
    report = compare_output(actual, expected, default_tolerance("float32"), "y")
    assert report.passed and report.metrics["within_rtol_atol"] == 1.0
    assert compare_output(expected, expected, {"gate": ["sqnr"]}, "y").metrics["sqnr_db"] == "inf"


def test_a_wrong_dtype_or_shape_fails_naming_it() -> None:
    expected = np.zeros((2, 2), dtype=np.int8)
    assert compare_output(expected.astype(np.uint8), expected, default_tolerance("int8"), "y").failed_gates == ["dtype"]
    assert compare_output(np.zeros((4,), np.int8), expected, default_tolerance("int8"), "y").failed_gates == ["shape"]


def test_outcomes_come_from_the_control_planes_comparison() -> None:
    expected = [("y", np.array([1, 2], dtype=np.int32))]
    tol = [default_tolerance("int32")]
    assert judge(expected=expected, tolerances=tol, status="ok", outputs=[np.array([1, 2], np.int32)]).outcome == PASS
    fail = judge(expected=expected, tolerances=tol, status="ok", outputs=[np.array([1, 3], np.int32)])
    assert fail.outcome == FAIL and fail.max_abs_error == 1.0
    assert judge(expected=expected, tolerances=tol, status="unsupported", outputs=None,
                 message="NOT_IMPLEMENTED").message == "NOT_IMPLEMENTED"
    assert judge(expected=expected, tolerances=tol, status="unsupported", outputs=None).outcome == UNSUPPORTED
    assert judge(expected=expected, tolerances=tol, status="error", outputs=None).outcome == ERROR
    assert judge(expected=expected, tolerances=tol, status="ok", outputs=[]).outcome == FAIL


def test_tolerances_are_checked_against_the_outputs_dtype() -> None:
    assert check_tolerance({"gate": ["lsb"], "max_lsb": 1}, "uint8") == []
    assert check_tolerance({"gate": ["ulp"]}, "int8") == ["gate: ulp applies to floats, this output is int8"]
    assert check_tolerance({"gate": ["lsb"]}, "float32") == ["gate: lsb applies to integers, this output is float32"]
    assert check_tolerance({}, "float32") == [
        "gate: name at least one of exact_rate, lsb, allclose, ulp, cosine, sqnr, max_abs, top1"]
