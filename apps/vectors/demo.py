"""Demo vectors (idempotent): the onnx INT8 suite and the model-level suite imported, and a
gray pool of standby nodes per module type, so the demo's candidate can be validated at once."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from apps.audit.choices import Source
from apps.inventory.choices import NodeState
from apps.inventory.models import ModuleType, Node
from apps.operations import lifecycle
from apps.vectors.services import suite_import
from apps.vectors.sources import model_int8_cases, onnx_node_cases

ACTOR = "seed_demo"
GRAY_PER_TYPE = 2


@transaction.atomic
def seed_vectors_demo() -> dict[str, Any]:
    suite, _ = suite_import(name="onnx-int8", specs=list(onnx_node_cases()), actor=ACTOR,
                            description="onnx node conformance cases of the INT8 operators",
                            provenance={"source": "onnx-node"})
    suite_import(name="model-int8", specs=list(model_int8_cases()), actor=ACTOR,
                 description="a small float model quantised to INT8, judged against its float outputs",
                 provenance={"source": "model-int8"})
    marked = []
    for mtype in ModuleType.objects.order_by("pk"):
        have = Node.objects.filter(gray=True, modules__module_type=mtype).distinct().count()
        spare = (Node.objects.filter(state=NodeState.STANDBY, gray=False, modules__module_type=mtype)
                 .distinct().order_by("-hostname")[:max(0, GRAY_PER_TYPE - have)])
        for node in spare:
            lifecycle.node_gray_set(node=node, gray=True, actor=ACTOR, source=Source.SYSTEM,
                                    reason=f"demo: the gray pool validates {mtype} combinations")
            marked.append(node.hostname)
    return {"vector_suite": str(suite), "gray_nodes": marked}
