"""The sweep on a small fleet reporting through the real ingest: findings with hysteresis,
unknown never a pass, capabilities, a broken check, flapping."""

from __future__ import annotations

import datetime as dt
from typing import Any
from unittest import mock

from django.utils import timezone

from apps.health import checks
from apps.health.choices import FindingState
from apps.health.models import CheckState, Finding
from apps.health.services import check_update
from apps.inventory.models import ModuleType
from tests.health.conftest import HealthFleet, findings, sweeps


def _ecc_fleet(hfleet: HealthFleet, nodes: int = 3) -> None:
    for i in range(nodes):
        hfleet.node(f"n-{i}")
    hfleet.all_report(at=timezone.now() - dt.timedelta(minutes=2))
    hfleet.rollup()


def test_it_raises_an_ecc_finding_on_3_of_5_and_resolves_after_5_passes(hfleet: HealthFleet) -> None:
    _ecc_fleet(hfleet)
    bad = hfleet.nodes["n-1"]
    hfleet.all_report()
    hfleet.sample(bad, modules={"n-1-m0": {"ecc_corrected": 2, "ecc_uncorrected": 1}})
    sweeps(2)
    assert findings("ecc") == []  # 2 of 5 failing: not yet
    sweeps(1)
    [f] = findings("ecc")
    assert f.state == FindingState.OPEN and f.severity == "critical" and f.subject_key.startswith("module:")
    assert f.module is not None and f.module.serial == "n-1-m0" and f.node == bad and f.evidence["new_uncorrected"] == 1
    assert "uncorrected" in f.summary

    # The counter stops growing: once the window's first minute holds the new count, passes follow.
    base = {"first_minute": timezone.now(), "ecc_corrected": 2, "ecc_uncorrected": 1, "errors": 0}
    with mock.patch("apps.telemetry.selectors.sweep.module_counter_baselines", return_value={f.module_id: base}):
        sweeps(4)
        assert Finding.objects.get(pk=f.pk).state == FindingState.OPEN
        sweeps(1)
    f.refresh_from_db()
    assert f.state == FindingState.RESOLVED and f.resolved_at is not None


def test_it_runs_no_ecc_check_on_a_module_type_without_ecc_counters(hfleet: HealthFleet) -> None:
    ModuleType.objects.filter(pk=hfleet.mtype.pk).update(capabilities=["link_width", "temperature", "power"])
    _ecc_fleet(hfleet)
    hfleet.all_report(modules={"n-1-m0": {"ecc_uncorrected": 5, "errors": 9}})
    sweeps(5)
    assert findings("ecc") == [] and findings("module_errors") == []
    assert not CheckState.objects.filter(check_name="ecc").exists()
    assert CheckState.objects.filter(check_name="link_width").count() == 6


def test_a_silent_node_gives_a_heartbeat_finding_and_its_other_findings_never_pass(hfleet: HealthFleet) -> None:
    _ecc_fleet(hfleet)
    hfleet.all_report(modules={"n-2-m1": {"link_width": 2}})
    sweeps(3)
    [link] = findings("link_width")
    assert link.module is not None and link.module.serial == "n-2-m1"
    # n-2 goes silent: its link check is unknown (never pass), its finding stays open; the heartbeat fails.
    with mock.patch("apps.health.selectors._age", side_effect=lambda now, seen: 300.0 if seen else None):
        sweeps(8)
    link.refresh_from_db()
    assert link.state == FindingState.OPEN
    assert set(CheckState.objects.filter(check_name="link_width").values_list("last_status", flat=True)) == {"unknown"}
    assert {f.node.hostname for f in findings("heartbeat") if f.node} == {"n-0", "n-1", "n-2"}


def test_a_check_that_raises_gives_a_checker_finding_and_the_sweep_goes_on(hfleet: HealthFleet) -> None:
    _ecc_fleet(hfleet)
    hfleet.all_report(modules={"n-0-m0": {"link_width": 1}})

    def broken(*args: Any) -> None:
        raise ZeroDivisionError("division by zero")

    with mock.patch.dict(checks.CHECKS, {"temperature": checks.CHECKS["temperature"].__class__(
            **{**checks.CHECKS["temperature"].__dict__, "fn": broken})}):
        result = sweeps(3)[-1]
    assert result["errors"] == {"temperature": 6}
    [checker] = findings("checker")
    assert checker.subject_key == "check:temperature" and "ZeroDivisionError" in checker.summary
    assert [f.module.serial for f in findings("link_width") if f.module] == ["n-0-m0"]  # the other checks went on
    assert set(CheckState.objects.filter(check_name="temperature").values_list("last_status", flat=True)) == {
        "unknown"}
    sweeps(3)
    checker.refresh_from_db()
    assert checker.state == FindingState.RESOLVED


def test_a_finding_back_soon_after_resolving_reopens_and_is_marked_flapping(hfleet: HealthFleet) -> None:
    _ecc_fleet(hfleet, nodes=1)
    check_update(name="link_width", actor="test", raise_n=1, raise_m=1, clear_k=1)
    for _ in range(2):
        hfleet.all_report(modules={"n-0-m0": {"link_width": 2}})
        sweeps(1)
        hfleet.all_report()
        sweeps(1)
    hfleet.all_report(modules={"n-0-m0": {"link_width": 2}})
    sweeps(1)
    [f] = findings("link_width")
    assert f.reopened == 2 and f.flapping and f.state == FindingState.OPEN
    hfleet.all_report()
    sweeps(3)  # a flapping finding needs more than K passes to resolve
    f.refresh_from_db()
    assert f.state == FindingState.OPEN


def test_an_operators_drain_past_its_deadline_raises_a_finding(hfleet: HealthFleet) -> None:
    from apps.operations import controllers, lifecycle
    from apps.operations.models import Drain

    _ecc_fleet(hfleet, nodes=6)
    node = hfleet.nodes["n-1"]
    lifecycle.node_drain(node=node, reason="swapping a PSU", actor="alice", deadline_s=600)
    hfleet.all_report()  # in flight 2: the drain cannot finish
    sweeps(3)
    assert findings("drain_deadline") == []
    Drain.objects.filter(node=node).update(deadline=timezone.now() - dt.timedelta(seconds=90))
    controllers.drains_advance()  # the controller alerts (an audit row), and now health raises a finding
    sweeps(3)
    [f] = findings("drain_deadline")
    assert f.node == node and f.evidence["by"] == "alice" and f.evidence["in_flight"] == 2
    assert "passed its deadline" in f.summary and "swapping a PSU" in f.summary


def test_it_tells_the_browsers_when_a_finding_opens(hfleet: HealthFleet) -> None:
    _ecc_fleet(hfleet, nodes=1)
    hfleet.all_report(modules={"n-0-m0": {"link_width": 2}})
    with mock.patch("apps.health.services.publish") as publish:
        sweeps(3)
    [(args, kwargs)] = [(c.args, c.kwargs) for c in publish.call_args_list]
    assert args[0] == "health.finding" and args[1]["event"] == "open" and args[1]["check"] == "link_width"
    assert kwargs["groups"] == ["fleet", f"node.{hfleet.nodes['n-0'].pk}"]
