"""The planner page: login required, viewers welcome; plotly.js served from the installed package."""

import gzip
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from apps.common.views import PLOTLY_JS, PLOTLY_VERSION

pytestmark = pytest.mark.django_db


def test_it_sends_anonymous_visitors_to_log_in(client: Client) -> None:
    r = client.get("/planner/")
    assert r.status_code == 302
    assert r["Location"] == "/login/?next=/planner/"


def test_it_refuses_a_user_without_a_role(client: Client) -> None:
    client.force_login(User.objects.create_user("nobody", password="pw"))
    assert client.get("/planner/").status_code == 403


def test_it_shows_the_form_with_the_worked_example_to_a_viewer(client: Client, viewer_user: Any) -> None:
    client.force_login(viewer_user)
    r = client.get("/planner/")
    assert r.status_code == 200
    html = r.content.decode()
    assert 'name="concurrent_users" value="1000"' in html
    assert 'name="gflops_per_token" value="6"' in html
    assert 'name="usable_fraction" value="0.25"' in html
    assert 'name="batching_gain" value="1.7"' in html
    assert f"/static-pkg/plotly.min.js?v={PLOTLY_VERSION}" in html
    assert 'id="planner-initial-figure"' in html
    assert "csrftoken" in r.cookies


def test_it_serves_plotly_js_from_the_package_with_long_caching(client: Client) -> None:
    r = client.get("/static-pkg/plotly.min.js")
    assert r.status_code == 200
    assert r["Content-Type"].startswith("text/javascript")
    assert "max-age=31536000" in r["Cache-Control"]
    head = b"".join(r.streaming_content)[:400]  # type: ignore[attr-defined]
    assert b"plotly.js" in head
    zipped = client.get("/static-pkg/plotly.min.js", HTTP_ACCEPT_ENCODING="gzip, deflate")
    assert zipped["Content-Encoding"] == "gzip"
    assert gzip.decompress(zipped.content) == PLOTLY_JS.read_bytes()
    assert len(zipped.content) < PLOTLY_JS.stat().st_size / 2
