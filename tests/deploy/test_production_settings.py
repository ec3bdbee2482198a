"""Production settings: `manage.py check --deploy` is clean with the production environment, a
placeholder SECRET_KEY refuses to start, and LOG_FORMAT=json gives one JSON object a line carrying
the request id the response returned. Each runs the product's own settings in a fresh process."""

from __future__ import annotations

import json
import logging
import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PRODUCTION = {
    "DJANGO_SETTINGS_MODULE": "controlplane.settings",
    "DEBUG": "0",
    "SECRET_KEY": secrets.token_urlsafe(50),
    "ALLOWED_HOSTS": "controlplane.example.org",
    "CSRF_TRUSTED_ORIGINS": "https://controlplane.example.org",
    "HTTPS_ONLY": "1",
    "TRUST_X_FORWARDED_PROTO": "1",
    "LOG_FORMAT": "json",
}


def run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    # DATABASE_URL and REDIS_URL come from the environment the tests run in (their engines); the
    # browser tests' permission to call the ORM from async code (tests/browser/conftest.py) does not.
    inherited = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**inherited, **env})


def check_deploy(**env: str) -> subprocess.CompletedProcess[str]:
    return run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], **env)


def test_check_deploy_is_clean_with_the_production_environment() -> None:
    result = check_deploy(**PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_fails_a_site_that_is_not_https_only() -> None:
    result = check_deploy(**{**PRODUCTION, "HTTPS_ONLY": "0"})
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):  # HSTS, redirect, cookies
        assert warning in result.stderr, warning


def test_a_placeholder_or_missing_secret_key_refuses_to_start() -> None:
    placeholder = check_deploy(**{**PRODUCTION, "SECRET_KEY": "CHANGE_ME_TO_A_LONG_RANDOM_STRING"})
    assert placeholder.returncode != 0
    assert "SECRET_KEY is a placeholder or too weak" in placeholder.stderr
    missing = check_deploy(**{**PRODUCTION, "SECRET_KEY": "", "SECRET_KEY_GENERATE": "0"})
    assert missing.returncode != 0
    assert "SECRET_KEY is not set" in missing.stderr


SERVE_ONE_REQUEST = """
import django
django.setup()
from django.test import Client
response = Client().get("/no-such-page/", headers={"X-Request-ID": "req-7f3a"}, secure=True)
print("X-Request-ID:", response["X-Request-ID"], response.status_code)
"""


def test_json_logs_carry_the_request_id_the_response_returned() -> None:
    result = run(["-c", SERVE_ONE_REQUEST], **{**PRODUCTION, "ALLOWED_HOSTS": "testserver"})
    assert result.returncode == 0, result.stderr
    assert "X-Request-ID: req-7f3a 404" in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    (not_found,) = [e for e in entries if e["logger"] == "django.request"]
    assert not_found["request_id"] == "req-7f3a"
    assert not_found["level"] == "WARNING" and "/no-such-page/" in not_found["message"]


def test_a_line_logged_while_a_request_is_served_carries_its_id() -> None:
    from apps.common.logs import JsonFormatter, current_request_id

    record = logging.LogRecord("apps.operations", logging.INFO, __file__, 1, "drained %s", ("n-r1-07",), None)
    token = current_request_id.set("req-51c0")
    try:
        line = JsonFormatter().format(record)
    finally:
        current_request_id.reset(token)
    assert "\n" not in line
    assert json.loads(line) | {"time": None} == {"time": None, "level": "INFO", "logger": "apps.operations",
                                                 "message": "drained n-r1-07", "request_id": "req-51c0"}
