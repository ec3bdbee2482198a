"""/readyz: a pod is ready only when PostgreSQL, Redis and every migration are; /healthz only says
the process answers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from apps.common import views


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    """The probe forgets that it once saw every migration applied (it remembers for the process)."""
    views._all_migrated = False
    yield
    views._all_migrated = False


@pytest.mark.django_db
def test_it_is_ready_when_everything_is_migrated(fresh_probe: None) -> None:
    response = Client().get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_it_answers_503_naming_an_unapplied_migration_and_200_once_it_is_applied(fresh_probe: None) -> None:
    leaf = max(MigrationExecutor(connection).loader.graph.leaf_nodes())  # e.g. ("vectors", "0004_...")
    with connection.cursor() as cur:
        cur.execute("SELECT id, applied FROM django_migrations WHERE app = %s AND name = %s", leaf)
        row_id, applied = cur.fetchone()
        cur.execute("DELETE FROM django_migrations WHERE id = %s", [row_id])

    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["problems"] == {"migrations": f"1 unapplied, first {leaf[0]}.{leaf[1]}"}

    with connection.cursor() as cur:  # the migrate job finishes
        cur.execute("INSERT INTO django_migrations (id, app, name, applied) VALUES (%s, %s, %s, %s)",
                    [row_id, *leaf, applied])
    assert Client().get("/readyz").status_code == 200


@pytest.mark.django_db
def test_once_everything_is_migrated_it_stops_reading_the_migrations(fresh_probe: None) -> None:
    assert Client().get("/readyz").status_code == 200
    with CaptureQueriesContext(connection) as queries:
        assert Client().get("/readyz").status_code == 200
    assert not [q for q in queries if "django_migrations" in q["sql"]]


def test_healthz_answers_without_the_database() -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_probes_answer_by_the_pods_address_over_plain_http(fresh_probe: None) -> None:
    """Orchestrators call the probes, and Prometheus the metrics, by the pod's IP (not an allowed
    host) and over plain HTTP: they must get the answer, not the 400 or the redirect to HTTPS
    (which a kubelet counts as success) that a page gets."""
    with override_settings(SECURE_SSL_REDIRECT=True):
        client = Client(HTTP_HOST="10.244.1.17:8000")
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200
        assert client.get("/metrics").status_code == 200  # Prometheus scrapes pods the same way
        assert client.get("/login/").status_code == 400
        assert Client().get("/login/").status_code == 301
