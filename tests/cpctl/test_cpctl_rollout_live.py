"""cpctl's rollout and vector commands as an operator runs them: subprocesses against a live web
process, on a fleet whose agents answer in process (tests/rollouts/conftest.py). The preview as
JSON is the API's own; a start the health gate refuses ends 1 with the server's words and nothing
written; named in ``--override`` with a reason it starts, and ``rollout watch`` follows it to
``completed`` (exit 0) while the controller runs; a vector run on the new combination's modules
ends ``passed`` with ``--wait``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token

from apps.accounts.services import user_ensure
from apps.health.models import Finding
from apps.rollouts.models import Rollout
from apps.vectors.models import VectorRun
from controlplane.engines import BASE_DIR
from tests.cpctl.test_cpctl_live import cpctl, cpctl_env
from tests.live.stack import LiveStack, wait_for
from tests.rollouts.conftest import RolloutFleet

pytestmark = pytest.mark.live


def test_cpctl_previews_is_refused_on_a_failing_gate_starts_past_it_and_watches_the_rollout_complete(
        live_stack: LiveStack, tmp_path: Path) -> None:
    live_stack.web()
    fleet = RolloutFleet()
    nodes = [fleet.node(h) for h in ("n-r-1", "n-r-2", "n-r-3", "n-r-4")]
    module = nodes[3].modules.get()
    now = timezone.now()
    # a warning the rollout will not fix: the health gate fails on it (a critical one would keep the node out)
    Finding.objects.create(check_name="temperature", subject_kind="module", subject_key=f"module:{module.pk}",
                           node=nodes[3], module=module, severity="warning", summary="86 °C", first_seen=now,
                           last_seen=now)
    user, _ = user_ensure(username="live-cli-rollouts", password="pw-live-cli-r", role="operator")
    key = Token.objects.get_or_create(user=user)[0].key
    api = httpx.Client(base_url=live_stack.url, headers={"Authorization": f"Token {key}"}, timeout=30)
    env = cpctl_env(tmp_path)
    assert cpctl(env, "config", "set-context", "live", "--server", live_stack.url, "--token", key).returncode == 0
    scope = ["--combination", str(fleet.candidate.pk), "--wave-size", "2", "--max-unavailable", "2", "--bake", "0",
             "--suite", str(fleet.suite.pk)]

    done = cpctl(env, "rollout", "preview", *scope, "-o", "json")
    assert done.returncode == 0, done.stderr
    asked = {"combination": fleet.candidate.pk, "module_type": fleet.mtype.pk, "wave_size": 2,
             "max_unavailable": "2", "bake_s": 0, "suite": fleet.suite.pk}
    assert json.loads(done.stdout) == api.post("/api/v1/rollouts/preview/", json=asked).json()
    assert json.loads(done.stdout)["failing"] == ["health"]
    text = cpctl(env, "rollout", "preview", *scope).stdout
    assert "  health: FAILS (overridable): " in text and "failing: health (a start needs --override" in text

    done = cpctl(env, "rollout", "create", *scope, "--reason", "driver 2.4.0")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("rollout create: refused (HTTP 409):\n") and "health" in done.stderr
    assert Rollout.objects.count() == 0

    done = cpctl(env, "rollout", "create", *scope, "--override", "health", "--reason", "the hot module is swapped "
                 "in its drain")
    assert done.returncode == 0, done.stderr
    rollout = Rollout.objects.get()
    assert done.stdout.startswith(f"rollout/{rollout.pk} created (planned): ")
    assert [o["gate"] for o in rollout.overrides] == ["health"]

    err_path = tmp_path / "watch.err"
    with err_path.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "cpctl", "rollout", "watch", str(rollout.pk), "--timeout", "5m"],
                                cwd=BASE_DIR, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            def ticked() -> int | None:  # the controller and the agents, on the test's own clock
                fleet.tick(rollout)
                return proc.poll()
            wait_for(lambda: ticked() is not None, timeout=240, what="cpctl to see the rollout end", interval=0.3)
            out = proc.stdout.read() if proc.stdout else ""
        finally:
            if proc.poll() is None:
                proc.kill()
    rollout.refresh_from_db()
    assert rollout.state == "completed", rollout.waiting_for
    assert proc.returncode == 0, err_path.read_text()
    assert out.startswith(f"rollout/{rollout.pk} completed after ")
    assert f"rollout/{rollout.pk} canary" in err_path.read_text()  # it said where it was on the way

    # the suite again on the modules now on the new combination, waiting for the verdict
    with (tmp_path / "vectors.err").open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "cpctl", "vectors", "run", "--suite", fleet.suite.name,
                                 "--combination", str(fleet.candidate.pk), "--reason", "after the rollout", "--wait",
                                 "--timeout", "4m"], cwd=BASE_DIR, env=env, stdout=subprocess.PIPE, stderr=err,
                                text=True)
        try:
            def answered() -> int | None:
                fleet.tick()
                return proc.poll()
            wait_for(lambda: answered() is not None, timeout=240, what="cpctl to see the run's verdict", interval=0.3)
            out = proc.stdout.read() if proc.stdout else ""
        finally:
            if proc.poll() is None:
                proc.kill()
    run = VectorRun.objects.order_by("-pk").first()
    assert run is not None and run.state == "passed", run and run.message
    assert proc.returncode == 0, (tmp_path / "vectors.err").read_text()
    assert out.splitlines()[-1].startswith(f"vector-run/{run.pk} passed")
