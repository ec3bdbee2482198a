"""Resends while the API answers 5xx, and batches the API will never take, against a
small real HTTP server standing in for a struggling API."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agent.cp_agent.backends import NoModules
from agent.cp_agent.client import ApiClient
from agent.cp_agent.inflight import NoInFlight
from agent.cp_agent.runner import Agent
from agent.cp_agent.spool import Spool


class Flaky:
    """Answers 503 to the first ``failures`` telemetry posts, then stores batches (200 duplicate on a resend);
    a batch whose sample has cpu_util > 1 gets 400."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.seen: list[str] = []
        self.stored: list[str] = []
        self.lock = threading.Lock()


@pytest.fixture
def flaky() -> Iterator[tuple[Flaky, str]]:
    state = Flaky(failures=4)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                state.seen.append(body["batch_id"])
                out: dict[str, object]
                if state.failures > 0:
                    state.failures -= 1
                    code, out = 503, {"detail": "database unavailable"}
                elif body["node_samples"][0]["cpu_util"] > 1:
                    code, out = 400, {"detail": "node_samples[0].cpu_util: must be at most 1"}
                elif body["batch_id"] in state.stored:
                    code, out = 200, {"batch_id": body["batch_id"], "duplicate": True}
                else:
                    state.stored.append(body["batch_id"])
                    code, out = 202, {"batch_id": body["batch_id"], "duplicate": False}
            data = json.dumps(out).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_it_resends_in_order_through_5xx_answers(flaky: tuple[Flaky, str], tmp_path: Path) -> None:
    state, url = flaky
    spool = Spool(tmp_path)
    agent = Agent(client=ApiClient(url, "k"), node="n-1", spool=spool, backend=NoModules(), in_flight=NoInFlight(),
                  backoff_base=0.01, backoff_cap=0.05, poll_commands=False)
    made = [spool.append({"node_samples": [{"node": "n-1", "cpu_util": 0.1 * i}]}).batch_id for i in range(3)]
    while not agent.send_pending():
        pass
    assert state.stored == made
    assert state.seen[:4] == [made[0]] * 4  # the oldest batch retried, nothing sent past it
    assert agent.stats.send_failures == 4 and agent.stats.outages == 1
    assert len(spool) == 0


def test_it_drops_a_batch_the_api_rejects_and_goes_on(flaky: tuple[Flaky, str], tmp_path: Path) -> None:
    state, url = flaky
    state.failures = 0
    spool = Spool(tmp_path)
    agent = Agent(client=ApiClient(url, "k"), node="n-1", spool=spool, backend=NoModules(), in_flight=NoInFlight(),
                  poll_commands=False)
    bad = spool.append({"node_samples": [{"node": "n-1", "cpu_util": 7}]}).batch_id
    good = spool.append({"node_samples": [{"node": "n-1", "cpu_util": 0.5}]}).batch_id
    assert agent.send_pending()
    assert state.stored == [good] and bad in state.seen
    assert agent.stats.batches_rejected == 1 and agent.stats.samples_rejected == 1


def test_a_connection_closed_under_a_send_is_sent_again_not_counted_as_a_failure() -> None:
    """A server's idle timeout can meet the agent's send interval: the kept-alive connection closes as
    the batch goes out, with no answer. The batch is sent again at once on a new connection."""
    posts: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn
        served = 0

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            posts.append(body["batch_id"])
            if self.served:  # the second request on this connection: close it unanswered
                self.close_connection = True
                return
            self.served += 1
            data = json.dumps({"stored": True}).encode()
            self.send_response(202)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = ApiClient(f"http://127.0.0.1:{server.server_address[1]}", "key")
    try:
        first = client.send_batch({"batch_id": "b1", "node_samples": []})
        second = client.send_batch({"batch_id": "b2", "node_samples": []})
    finally:
        client.close()
        server.shutdown()
    assert (first.outcome.value, second.outcome.value) == ("stored", "stored")
    assert posts == ["b1", "b2", "b2"]  # b2 went out twice: once into the closing connection, once anew
