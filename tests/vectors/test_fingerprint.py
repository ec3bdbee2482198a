"""Fleet fingerprinting: a module whose outputs differ from its twins' on the same case is
singled out even when every output is inside its tolerance (the simulator's
silent_corruption fault nudges one module's float outputs by 1e-5, well inside rtol 1e-3)."""

from __future__ import annotations

import pytest

from apps.simulator.services import fault_set
from apps.vectors.advance import run_advance
from apps.vectors.choices import RunState
from apps.vectors.models import VectorResult
from apps.vectors.runs import run_create
from tests.vectors.test_import import EXPECTED
from tests.vectors.test_validation import SimulatedGrayPool

pytestmark = pytest.mark.django_db

FLOAT_OUTPUT_CASES = sorted(n for n in EXPECTED if n.startswith("test_dynamicquantizelinear"))


def test_only_the_corrupted_module_is_flagged_inside_tolerance(fleet, int8_suite) -> None:  # type: ignore[no-untyped-def]
    nodes = [fleet.node(h) for h in ("n-a", "n-b", "n-c")]
    fault_set(kind="silent_corruption", node=nodes[1], actor="test")
    pool = SimulatedGrayPool(fleet)
    run = run_create(suite=int8_suite, modules=[m for n in nodes for m in n.modules.all()], actor="test")
    run_advance(run.pk)
    for node in nodes:
        assert pool.poll(node.hostname) == [("run_vectors", "succeeded")]

    assert run_advance(run.pk) == RunState.PASSED  # every output inside its tolerance
    run.refresh_from_db()
    assert run.summary["fingerprint_outliers"] == {"n-b-m0": FLOAT_OUTPUT_CASES}
    assert run.message.endswith("outputs differ from their twins' (possible silent data corruption): "
                                "n-b-m0 (6 case(s))")
    assert not VectorResult.objects.filter(run=run).exclude(outcome__in=["pass", "unsupported", "error"]).exists()


def test_twins_agree_without_the_fault(fleet, int8_suite) -> None:  # type: ignore[no-untyped-def]
    nodes = [fleet.node(h) for h in ("n-a", "n-b", "n-c")]
    pool = SimulatedGrayPool(fleet)
    run = run_create(suite=int8_suite, modules=[m for n in nodes for m in n.modules.all()], actor="test")
    run_advance(run.pk)
    for node in nodes:
        pool.poll(node.hostname)
    assert run_advance(run.pk) == RunState.PASSED
    run.refresh_from_db()
    assert run.summary["fingerprint_outliers"] == {}
    digests = VectorResult.objects.filter(run=run, vector__name="test_qlinearconv").values_list("digest", flat=True)
    assert len(set(digests)) == 1 and len(digests) == 3
