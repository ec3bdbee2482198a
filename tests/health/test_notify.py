"""Notifications: an Alertmanager-shaped webhook on open and on resolve to a local HTTP
receiver that answers 500 once and gets the retry; a silenced finding sends nothing; email
through Django's mail backend; the delivery log per finding."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone

from apps.health.models import Delivery, Finding, Receiver
from apps.health.services import silence_create
from apps.health.tasks import health_notify
from tests.health.conftest import HealthFleet, sweeps


class Hook:
    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.fail_next = 0
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if hook.fail_next:
                    hook.fail_next -= 1
                    self.send_response(500)
                else:
                    hook.received.append(body)
                    self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/alerts"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.server.shutdown()


def _eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the queued notification tasks in-process (retries included) when the transaction commits."""
    monkeypatch.setattr(health_notify, "apply_async",
                        lambda args, kwargs=None, **options: health_notify.apply(args=args))


def test_a_webhook_gets_alertmanager_payloads_on_open_and_resolve_with_a_retry(
        hfleet: HealthFleet, hook: Hook, monkeypatch: pytest.MonkeyPatch, settings: Any,
        django_capture_on_commit_callbacks: Any) -> None:
    settings.HEALTH_NOTIFY_BACKOFF_S = 0
    _eager(monkeypatch)
    Receiver.objects.create(name="oncall", kind="webhook", url=hook.url, min_severity="warning")
    hfleet.node("n-0")
    hfleet.all_report(modules={"n-0-m1": {"link_width": 2}})
    hook.fail_next = 1
    with django_capture_on_commit_callbacks(execute=True):
        sweeps(3)
    [body] = hook.received
    assert body["version"] == "4" and body["status"] == "firing" and body["receiver"] == "oncall"
    [alert] = body["alerts"]
    assert alert["labels"]["alertname"] == "link_width" and alert["labels"]["module"] == "n-0-m1"
    assert alert["labels"]["node"] == "n-0" and alert["endsAt"] == "0001-01-01T00:00:00Z"
    assert "lane budget" in alert["annotations"]["cause"] and alert["annotations"]["remedy"]
    assert body["text"].startswith("[FIRING] warning link_width on n-0-m1: PCIe link trained at x2")
    d = Delivery.objects.get(event="open")
    assert d.state == "sent" and d.attempts == 2  # the 500, then the retry

    hfleet.all_report()
    with django_capture_on_commit_callbacks(execute=True):
        sweeps(5)
    assert [b["status"] for b in hook.received] == ["firing", "resolved"]
    assert hook.received[1]["alerts"][0]["endsAt"] != "0001-01-01T00:00:00Z"
    f = Finding.objects.get(check_name="link_width")
    assert list(f.deliveries.order_by("id").values_list("event", "state")) == [("open", "sent"), ("resolve", "sent")]


def test_a_silenced_finding_sends_nothing_and_email_goes_through_django(
        hfleet: HealthFleet, hook: Hook, monkeypatch: pytest.MonkeyPatch,
        django_capture_on_commit_callbacks: Any) -> None:
    _eager(monkeypatch)
    Receiver.objects.create(name="oncall", kind="webhook", url=hook.url, min_severity="info")
    Receiver.objects.create(name="mail", kind="email", email="ops@example.com", min_severity="warning")
    quiet = hfleet.node("n-0")
    hfleet.node("n-1")
    silence_create(reason="reseating its modules", expires_at=timezone.now() + dt.timedelta(hours=1),
                   actor="alice", node=quiet)
    hfleet.all_report(modules={"n-0-m1": {"link_width": 2}, "n-1-m0": {"link_width": 1}})
    with django_capture_on_commit_callbacks(execute=True):
        sweeps(3)
    assert [b["alerts"][0]["labels"]["node"] for b in hook.received] == ["n-1"]
    assert not Delivery.objects.filter(finding__node=quiet).exists()
    [email] = mail.outbox
    assert email.to == ["ops@example.com"] and "link_width on n-1-m0" in email.subject
    assert "Remedy:" in email.body
