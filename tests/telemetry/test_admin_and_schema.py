"""The admin pages of every telemetry model, and the endpoints in the OpenAPI schema."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.test import Client

from tests.telemetry.conftest import Fleet


def test_it_renders_every_telemetry_admin_page(fleet: Fleet, admin_user: Any) -> None:
    client = Client()
    client.force_login(admin_user)
    for model in apps.get_app_config("telemetry").get_models():
        url = f"/admin/telemetry/{model._meta.model_name}/"
        # Raw samples (partitioned; composite primary key) are not in the admin at all.
        expected = 404 if model._meta.is_composite_pk else 200
        assert client.get(url).status_code == expected, url


def test_it_documents_the_telemetry_endpoints(viewer_api: Any) -> None:
    r = viewer_api.get("/api/schema/", HTTP_ACCEPT="application/json")
    paths = set(r.json()["paths"])
    assert {"/api/v1/telemetry/", "/api/v1/agent/commands/", "/api/v1/agent/commands/{id}/ack/",
            "/api/v1/node-commands/", "/api/v1/fleet/snapshot/", "/api/v1/fleet/series/queue-depth/",
            "/api/v1/fleet/series/stage-latency/", "/api/v1/fleet/nodes/{id}/history/"} <= paths
