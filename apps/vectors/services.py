"""Writes of regression test vectors: storing vectors (content-addressed), suites
(immutable once published). Runs and validation are in ``runs.py`` and ``validation.py``."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.audit.choices import Source
from apps.audit.services import audit_record
from apps.common.errors import Conflict
from apps.vectors.choices import SuiteState
from apps.vectors.models import Suite, SuiteVector, Vector
from apps.vectors.sources import VectorSpec


def vector_store(spec: VectorSpec) -> tuple[Vector, bool]:
    """The vector with ``spec``'s content: the stored one when its hash is known (content is
    never changed), else a new row. Returns (vector, created)."""
    sha = spec.sha256
    existing = Vector.objects.filter(sha256=sha).first()
    if existing is not None:
        return existing, False
    vector, created = Vector.objects.get_or_create(sha256=sha, defaults={
        "name": spec.name[:200], "operator": spec.operator[:64], "opset": spec.opset, "model": spec.model,
        "model_sha256": hashlib.sha256(spec.model).hexdigest(), "inputs": spec.inputs,
        "expected": spec.expected, "tolerances": spec.tolerances, "provenance": spec.provenance,
    })
    return vector, created


@transaction.atomic
def suite_import(*, name: str, specs: Iterable[VectorSpec], actor: Any, description: str = "",
                 provenance: dict[str, Any] | None = None, publish: bool = True,
                 source: str = Source.SYSTEM) -> tuple[Suite, bool]:
    """A suite of ``specs``: the latest version of ``name`` when it holds exactly these vectors
    (importing twice changes nothing), else the next version. Returns (suite, created)."""
    vectors: list[Vector] = []
    seen: set[int] = set()
    for spec in specs:
        vector, _ = vector_store(spec)
        if vector.pk not in seen:
            seen.add(vector.pk)
            vectors.append(vector)
    latest = Suite.objects.select_for_update().filter(name=name).order_by("-version").first()
    if latest is not None:
        held = list(latest.members.order_by("position").values_list("vector_id", flat=True))
        if held == [v.pk for v in vectors]:
            return latest, False
    suite = Suite.objects.create(name=name, version=(latest.version + 1) if latest else 1,
                                 description=description, provenance=provenance or {})
    SuiteVector.objects.bulk_create([SuiteVector(suite=suite, vector=v, position=i) for i, v in enumerate(vectors)])
    audit_record(actor=actor, action="vector_suite.create", target=suite, source=source,
                 changes={"vectors": [None, len(vectors)], "version": [None, suite.version]},
                 reason=f"{len(vectors)} vector(s)")
    if publish:
        suite = suite_publish(suite=suite, actor=actor, source=source)
    return suite, True


@transaction.atomic
def suite_publish(*, suite: Suite, actor: Any, source: str = Source.API) -> Suite:
    """Publish: from now on the suite's vectors never change (runs use published suites only)."""
    locked = Suite.objects.select_for_update().get(pk=suite.pk)
    if locked.state == SuiteState.PUBLISHED:
        return locked
    if not locked.members.exists():
        raise Conflict(f"suite {locked} has no vectors; nothing to publish")
    locked.state = SuiteState.PUBLISHED
    locked.published_at = timezone.now()
    locked.save(update_fields=["state", "published_at"])
    audit_record(actor=actor, action="vector_suite.publish", target=locked, source=source,
                 changes={"state": [SuiteState.DRAFT, SuiteState.PUBLISHED]})
    return locked


@transaction.atomic
def suite_draft(*, name: str, actor: Any, description: str = "", source: str = Source.API) -> Suite:
    """The draft version of suite ``name`` that uploads add to: the open one, else the next version."""
    latest = Suite.objects.select_for_update().filter(name=name).order_by("-version").first()
    if latest is not None and latest.state == SuiteState.DRAFT:
        return latest
    suite = Suite.objects.create(name=name, version=(latest.version + 1) if latest else 1, description=description,
                                 provenance={"source": "upload"})
    audit_record(actor=actor, action="vector_suite.create", target=suite, source=source,
                 changes={"version": [None, suite.version]}, reason="upload")
    return suite


@transaction.atomic
def suite_add_vectors(*, suite: Suite, specs: Iterable[VectorSpec], actor: Any, source: str = Source.API) -> Suite:
    """Add vectors to a draft suite; a published suite is immutable (409: publish a new version)."""
    locked = Suite.objects.select_for_update().get(pk=suite.pk)
    if locked.state == SuiteState.PUBLISHED:
        raise Conflict(f"suite {locked} is published and immutable; import or upload a new version")
    position = locked.members.count()
    added = 0
    for spec in specs:
        vector, _ = vector_store(spec)
        _, created = SuiteVector.objects.get_or_create(suite=locked, vector=vector,
                                                       defaults={"position": position})
        if created:
            position += 1
            added += 1
    audit_record(actor=actor, action="vector_suite.add", target=locked, source=source,
                 changes={"vectors": [position - added, position]})
    return locked
