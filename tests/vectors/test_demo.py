"""The demo seed imports the vector suites and a gray pool per module type, so its candidate
combination can be validated at once; seeding again changes nothing."""

from __future__ import annotations

import pytest

from apps.inventory.choices import CombinationState, NodeState
from apps.inventory.models import Module, ModuleType, Node, VersionCombination
from apps.simulator.demo import seed_demo
from apps.vectors.models import Suite, VectorRun

pytestmark = pytest.mark.django_db


def test_the_demo_can_validate_its_candidate_at_once(operator_api) -> None:  # type: ignore[no-untyped-def]
    seed_demo()
    gray = Node.objects.filter(gray=True)
    assert gray.count() == 2 * ModuleType.objects.count()
    assert set(gray.values_list("state", flat=True)) == {NodeState.STANDBY}
    for mtype in ModuleType.objects.all():
        assert Module.objects.filter(node__gray=True, module_type=mtype).exists()
    suite = Suite.objects.get(name="onnx-int8")
    assert suite.state == "published" and suite.vectors.count() == 45
    assert Suite.objects.get(name="model-int8").vectors.count() == 1

    candidate = VersionCombination.objects.get(state=CombinationState.CANDIDATE)
    response = operator_api.post(f"/api/v1/version-combinations/{candidate.pk}/validate/", {"suite": suite.pk},
                                 format="json")
    assert response.status_code == 201, response.json()
    run = VectorRun.objects.get(pk=response.json()["id"])
    assert run.targets.count() == Module.objects.filter(node__gray=True, module_type=candidate.module_type).count()

    seed_demo()
    assert Node.objects.filter(gray=True).count() == 2 * ModuleType.objects.count()
    assert Suite.objects.filter(name="onnx-int8").count() == 1
