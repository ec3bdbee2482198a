"""/readyz on a running web process: 503 naming the database while PostgreSQL is stopped, 200
again once it is back, with nothing restarted by hand (a load balancer takes the process out and
puts it back). Embedded engines only: the machine's server is not ours to stop."""

from __future__ import annotations

import httpx
import pytest
from django.db import connection

from controlplane import engines
from tests.live.stack import LiveStack, wait_for

pytestmark = [pytest.mark.live, pytest.mark.heavy, pytest.mark.django_db(transaction=True)]


def test_readyz_answers_503_while_postgresql_is_stopped_and_200_when_it_is_back(live_stack: LiveStack) -> None:
    if "DATABASE_URL" not in engines.embedded():
        pytest.skip("needs the embedded PostgreSQL (it is stopped and started again)")
    live_stack.web(writer=False)

    def readyz() -> httpx.Response:
        return httpx.get(f"{live_stack.url}/readyz", timeout=30)

    assert readyz().status_code == 200
    connection.close()
    engines.stop_postgres()
    stopped = True
    try:
        def unready() -> httpx.Response | None:
            answer = readyz()
            return answer if answer.status_code == 503 else None

        down = wait_for(unready, timeout=60, what="/readyz to answer 503 with PostgreSQL stopped")
        assert down is not None
        assert "database" in down.json()["problems"], down.text
        assert httpx.get(f"{live_stack.url}/healthz", timeout=30).status_code == 200  # alive, just not ready
        engines.start_postgres_again()
        stopped = False
        wait_for(lambda: readyz().status_code == 200, timeout=60, what="/readyz to answer 200 with PostgreSQL back")
    finally:
        if stopped:
            engines.start_postgres_again()
