"""The API reference page (Swagger UI from drf-spectacular-sidecar, no CDN): a standards-mode page
with a way back to the application and no favicon request."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_api_reference_is_a_standards_page_with_a_way_back(viewer_user: User) -> None:
    client = Client()
    client.force_login(viewer_user)
    response = client.get("/api/docs/")
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().lower().startswith("<!doctype html>"), body[:120]  # no quirks mode, no stray text
    assert '<a href="/">' in body and 'rel="icon"' in body
