"""cpctl without a server: the version check and tokens, against answers given in place of the API
(httpx.MockTransport)."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from controlplane.engines import BASE_DIR
from cpctl.cli import main
from cpctl.client import authorization


@pytest.fixture(autouse=True)
def context(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("CPCTL_SERVER", "http://cp.test")
    monkeypatch.setenv("CPCTL_TOKEN", "0123456789abcdef0123456789abcdef01234567")


def answer(status: int, body: Any, version: str | None = "1.0.0") -> httpx.Response:
    return httpx.Response(status, json=body, headers={"X-API-Version": version} if version else {})


def run(argv: list[str], handler: Callable[[httpx.Request], httpx.Response] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    transport = httpx.MockTransport(handler or (lambda r: pytest.fail(f"no request expected: {r.url}")))
    code = main(argv, out=out, err=err, transport=transport)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("version", "says"), [
    ("2.0.0", "speaks API 2.0.0; cpctl 0.1.0 speaks API 1.x only"),
    (None, "did not say which API version it speaks"),
])
def test_a_server_of_another_api_version_is_refused_with_exit_4(version: str | None, says: str) -> None:
    code, out, err = run(["version"], lambda r: answer(200, {"username": "ops", "role": "operator"}, version))
    assert code == 4 and out == "cpctl 0.1.0, speaks API 1.x\n"
    assert says in err


def test_version_names_both_sides() -> None:
    code, out, _ = run(["version"], lambda r: answer(200, {"username": "ops", "role": "operator"}, "1.0.0"))
    assert code == 0
    assert out.splitlines()[1] == "server http://cp.test, API 1.0.0; you are ops (operator)"


def test_tokens_get_the_scheme_their_kind_takes() -> None:
    assert authorization("0123456789abcdef0123456789abcdef01234567").startswith("Token ")
    assert authorization("Xy_3-long-urlsafe-service-token-value-abcdefghi") == \
        "Bearer Xy_3-long-urlsafe-service-token-value-abcdefghi"
    assert authorization("Token abc") == "Token abc"


def test_it_runs_without_importing_django() -> None:
    code = ("import sys, cpctl.cli, cpctl.actions, cpctl.reads; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'django', 'rest_framework', 'apps', "
            "'controlplane'}); print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=BASE_DIR, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
