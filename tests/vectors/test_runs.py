"""Runs: planned through the API, sent over the command channel, executed by the agent's
vector runner (fetching by hash through the agent endpoint), judged by the control plane."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pytest
from django.utils import timezone

from apps.agents.models import NodeCommand
from apps.audit.models import AuditEvent
from apps.vectors.advance import run_advance
from apps.vectors.choices import RunState, TargetState
from apps.vectors.models import VectorResult, VectorRun
from apps.vectors.runs import run_create
from tests.vectors.test_import import EXPECTED

pytestmark = pytest.mark.django_db


def _start(operator_api: Any, suite: Any, modules: list[Any]) -> VectorRun:
    response = operator_api.post("/api/v1/vector-runs/", {"suite": suite.pk, "modules": [m.pk for m in modules],
                                                         "reason": "check the fleet"}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["state"] == "queued"
    return VectorRun.objects.get(pk=response.json()["id"])


def test_a_run_stores_the_control_planes_verdict_per_module_and_case(operator_api, fleet, int8_suite) -> None:  # type: ignore[no-untyped-def]
    a, b = fleet.node("n-a"), fleet.node("n-b")
    run = _start(operator_api, int8_suite, [*a.modules.all(), *b.modules.all()])

    assert run_advance(run.pk) == RunState.RUNNING
    commands = NodeCommand.objects.filter(kind="run_vectors").order_by("node__hostname")
    assert [c.node.hostname for c in commands] == ["n-a", "n-b"]
    assert len(commands[0].args["vectors"]) == len(EXPECTED)
    assert "expected" not in str(commands[0].args)  # the agent gets hashes, never the answers

    assert fleet.agent_poll("n-a") == [("run_vectors", "succeeded")]
    assert run_advance(run.pk) == RunState.RUNNING  # n-b has not answered
    assert fleet.agent_poll("n-b") == [("run_vectors", "succeeded")]
    assert run_advance(run.pk) == RunState.PASSED

    run.refresh_from_db()
    assert run.summary["outcomes"] == {"pass": 34, "fail": 0, "unsupported": 54, "error": 2}
    assert run.message == "34 pass, 54 unsupported, 2 error, 0 fail"
    outcomes = dict(VectorResult.objects.filter(module__node=a).values_list("vector__name", "outcome"))
    assert outcomes == EXPECTED
    err = VectorResult.objects.get(module__node=a, vector__name="test_convinteger_with_padding")
    assert "Non per-tensor quantization is not supported" in err.message

    results = operator_api.get("/api/v1/vector-results/", {"run": run.pk, "outcome": "unsupported", "limit": 100})
    assert results.json()["count"] == 54
    assert "NOT_IMPLEMENTED" in results.json()["results"][0]["message"]
    assert AuditEvent.objects.filter(action="vector_run.create", target_id=str(run.pk)).count() == 1


def test_the_agents_outputs_are_judged_not_its_opinion(operator_api, fleet, int8_suite) -> None:  # type: ignore[no-untyped-def]
    node = fleet.node("n-a")
    run = _start(operator_api, int8_suite, list(node.modules.all()))
    run_advance(run.pk)

    def off_by_one(vector: dict[str, Any]) -> Any:
        if vector["operator"] != "QLinearMatMul":
            return None
        return lambda outs: [(o.astype(np.int16) + 1).clip(np.iinfo(o.dtype).min, np.iinfo(o.dtype).max)
                             .astype(o.dtype) for o in outs]

    fleet.agent_poll("n-a", perturb_for=off_by_one)
    assert run_advance(run.pk) == RunState.FAILED
    failing = VectorResult.objects.filter(run=run, outcome="fail")
    assert sorted(r.vector.name for r in failing) == sorted(n for n in EXPECTED if "qlinearmatmul" in n)
    r = failing.first()
    assert r is not None and r.max_abs_error == 1.0
    assert r.outputs[0]["max_lsb_diff"] == 1 and r.outputs[0]["failed_gates"] == ["exact_rate", "lsb"]
    run.refresh_from_db()
    assert run.message.startswith("8 case(s) outside tolerance: test_qlinearmatmul_2D_int8_float16")


def test_results_are_stored_once_per_run_module_and_case(operator_api, fleet, int8_suite) -> None:  # type: ignore[no-untyped-def]
    from apps.vectors.models import RunTarget
    from apps.vectors.runs import store_results

    node = fleet.node("n-a")
    run = _start(operator_api, int8_suite, list(node.modules.all()))
    run_advance(run.pk)
    fleet.agent_poll("n-a")
    target = RunTarget.objects.get(run=run)
    command = NodeCommand.objects.get(kind="run_vectors")
    # A worker killed after storing the results but before marking the module done: the next pass stores again.
    assert store_results(run, target, command.result)[0] == len(EXPECTED)
    assert store_results(run, target, command.result)[0] == 0
    assert run_advance(run.pk) == RunState.PASSED
    assert VectorResult.objects.filter(run=run).count() == len(EXPECTED)


def test_a_silent_module_times_out_and_the_run_ends_in_error(fleet, int8_suite) -> None:  # type: ignore[no-untyped-def]
    node = fleet.node("n-a")
    run = run_create(suite=int8_suite, modules=list(node.modules.all()), actor="test", timeout_s=30)
    run_advance(run.pk)
    from apps.vectors.models import RunTarget

    RunTarget.objects.filter(run=run).update(sent_at=timezone.now() - dt.timedelta(seconds=31))
    assert run_advance(run.pk) == RunState.ERROR
    target = RunTarget.objects.get(run=run)
    assert target.state == TargetState.TIMED_OUT and "no results within 30 s" in target.message


def test_an_agent_that_cannot_run_vectors_ends_the_run_in_error(fleet, int8_suite) -> None:  # type: ignore[no-untyped-def]
    node = fleet.node("n-a")
    run = run_create(suite=int8_suite, modules=list(node.modules.all()), actor="test")
    run_advance(run.pk)
    command = NodeCommand.objects.get(kind="run_vectors")
    client = fleet.client("n-a")
    client.get("/api/v1/agent/commands/", {"wait": 0})
    client.post(f"/api/v1/agent/commands/{command.pk}/ack/",
                {"status": "unknown", "result": {"message": "unknown command 'run_vectors'"}}, format="json")
    assert run_advance(run.pk) == RunState.ERROR
    run.refresh_from_db()
    assert "the agent answered unknown: unknown command 'run_vectors'" in run.message


def test_cancel_and_bad_requests(operator_api, viewer_api, fleet, int8_suite) -> None:  # type: ignore[no-untyped-def]
    node = fleet.node("n-a")
    missing = operator_api.post("/api/v1/vector-runs/", {"suite": int8_suite.pk}, format="json")
    assert missing.status_code == 400 and "modules" in missing.json()["errors"]
    assert viewer_api.post("/api/v1/vector-runs/", {"suite": int8_suite.pk, "modules": [node.modules.first().pk]},
                           format="json").status_code == 403
    run = _start(operator_api, int8_suite, list(node.modules.all()))
    cancel = operator_api.post(f"/api/v1/vector-runs/{run.pk}/cancel/", {"reason": "wrong suite"}, format="json")
    assert cancel.status_code == 200 and cancel.json()["state"] == "cancelled"
    again = operator_api.post(f"/api/v1/vector-runs/{run.pk}/cancel/", {}, format="json")
    assert again.status_code == 409 and again.json()["detail"] == f"run #{run.pk} already ended cancelled"
    assert run_advance(run.pk) == RunState.CANCELLED
    assert not NodeCommand.objects.filter(kind="run_vectors").exists()


def test_the_agent_endpoint_serves_a_vector_by_hash_to_node_agents_only(operator_api, fleet, int8_suite) -> None:  # type: ignore[no-untyped-def]
    fleet.node("n-a")
    vector = int8_suite.vectors.first()
    ok = fleet.client("n-a").get(f"/api/v1/agent/vectors/{vector.sha256}/")
    assert ok.status_code == 200 and set(ok.json()) == {"sha256", "name", "operator", "model", "inputs"}
    assert fleet.client("n-a").get("/api/v1/agent/vectors/" + "0" * 64 + "/").status_code == 404
    assert operator_api.get(f"/api/v1/agent/vectors/{vector.sha256}/").status_code == 403


def test_the_pages_show_runs_per_combination_and_a_runs_results(client, viewer_user, operator_api, fleet,
                                                                 int8_suite) -> None:  # type: ignore[no-untyped-def]
    node = fleet.node("n-a")
    run = run_create(suite=int8_suite, modules=list(node.modules.all()), actor="test", combination=fleet.pinned)
    run_advance(run.pk)
    fleet.agent_poll("n-a")
    run_advance(run.pk)
    client.force_login(viewer_user)

    versions = client.get("/vectors/")
    assert versions.status_code == 200
    page = versions.content.decode()
    assert f'data-run="{run.pk}"' in page and "17 pass, 0 fail, 27 unsupported, 1 error" in page
    charts = versions.context["charts"]
    figure = charts[f"vector-chart-{fleet.mtype.pk}"]
    names = {trace["name"] for trace in figure["data"]}
    assert {"QLinearMatMul pass %", "QLinearMatMul worst error", "ConvInteger pass %"} <= names
    qlm = next(t for t in figure["data"] if t["name"] == "QLinearMatMul pass %")
    assert list(qlm["y"]) == [100.0]
    conv = next(t for t in figure["data"] if t["name"] == "ConvInteger pass %")
    assert list(conv["y"]) == [100.0]  # the case that errors at run time is not judged: 1 of 1 judged passed

    detail = client.get(f"/vector-runs/{run.pk}/")
    html = detail.content.decode()
    assert detail.status_code == 200 and "45 / 45 results (100.0 %)" in html
    assert html.count('data-outcome="') == 45 and 'http-equiv="refresh"' not in html
    run.refresh_from_db()
    assert run.finished_at is not None and f"since {run.finished_at:%Y-%m-%d %H:%M:%S} UTC" in html
    errors = client.get(f"/vector-runs/{run.pk}/", {"outcome": "error"}).content.decode()
    assert errors.count('data-outcome="error"') == 1 and "Non per-tensor quantization" in errors
    assert client.get("/vector-runs/999999/").status_code == 404
