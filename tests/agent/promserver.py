"""A small HTTP server serving Prometheus exposition text that a test changes as it goes
(a serving process's in-flight gauge, an exporter's metrics)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class PromServer:
    def __init__(self, text: str = "") -> None:
        self.text = text
        self.status = 200
        self.scrapes = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                with server._lock:
                    server.scrapes += 1
                    body, status = server.text.encode(), server.status
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="prom-server", daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/metrics"

    def serve(self, text: str, status: int = 200) -> None:
        with self._lock:
            self.text, self.status = text, status

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def in_flight_gauge(by_model: dict[str, int], *, name: str = "nv_inference_pending_request_count") -> str:
    """Triton-style exposition: one gauge, one series per (model, version)."""
    lines = [f"# HELP {name} Instantaneous number of pending requests awaiting execution per-model.",
             f"# TYPE {name} gauge"]
    lines += [f'{name}{{model="{model}",version="1"}} {count}' for model, count in by_model.items()]
    lines += ["# HELP nv_inference_count Number of inferences performed", "# TYPE nv_inference_count counter"]
    lines += [f'nv_inference_count{{model="{model}",version="1"}} 1234' for model in by_model]
    return "\n".join(lines) + "\n"


@pytest.fixture
def prom_server() -> Iterator[PromServer]:
    """A local Prometheus text endpoint the test controls (tests/agent's conftest and any other
    test module import this fixture)."""
    server = PromServer()
    try:
        yield server
    finally:
        server.close()
