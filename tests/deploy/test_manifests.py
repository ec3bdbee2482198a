"""The image and the manifests, checked offline (no Docker, no cluster): hadolint on the Dockerfile,
the Compose specification's schema on compose.yaml, Kubernetes' own schemas on every resource the
Kustomize base renders, and every process kind of deploy/Procfile run with the same command in
Compose and Kubernetes. Each tool is also fed a broken copy, so a check cannot pass by checking nothing."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
BIN = Path(sys.executable).parent
KINDS = ("web", "worker", "beat", "broadcaster", "writer")


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120)


# --- Dockerfile ---------------------------------------------------------------------------------

def hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    return run(BIN / "hadolint", "--failure-threshold", "info", path)


def test_the_dockerfile_passes_hadolint() -> None:
    result = hadolint(DEPLOY / "Dockerfile")
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_fails_a_dockerfile_that_runs_as_root_with_unpinned_installs(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install django\nUSER root\n")
    result = hadolint(bad)
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # :latest
    assert "DL3013" in result.stdout  # unpinned pip install


def test_the_image_is_multi_stage_non_root_with_static_files_and_a_healthcheck() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+)", text, re.M)
    assert len(stages) >= 2 and all(s.startswith("python:3.11-slim") for s in stages)
    assert re.search(r"^USER (?!root|0\b)\S+", text, re.M)
    assert "collectstatic" in text
    assert re.search(r"^HEALTHCHECK .*\n?.*/healthz", text, re.M)


# --- Compose ------------------------------------------------------------------------------------

def compose_schema(path: Path) -> subprocess.CompletedProcess[str]:
    return run(BIN / "check-jsonschema", "--builtin-schema", "vendor.compose-spec", path)


def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def test_compose_yaml_follows_the_compose_specification() -> None:
    result = compose_schema(DEPLOY / "compose.yaml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_compose_schema_check_fails_a_broken_compose_file(tmp_path: Path) -> None:
    bad = tmp_path / "compose.yaml"
    bad.write_text((DEPLOY / "compose.yaml").read_text().replace("replicas: 2", "replicas: [two]", 1))
    result = compose_schema(bad)
    assert result.returncode != 0
    assert "replicas" in result.stdout


def test_compose_runs_two_of_every_process_kind_after_the_migrate_job_behind_a_websocket_proxy() -> None:
    services = compose()["services"]
    assert {"postgres", "redis", "migrate", "proxy", *KINDS} <= set(services)
    for kind in KINDS:
        assert services[kind]["deploy"]["replicas"] == 2, kind
        assert services[kind]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    nginx = (DEPLOY / "nginx.conf").read_text()
    assert "proxy_set_header Upgrade $http_upgrade" in nginx and "proxy_pass http://controlplane_web" in nginx
    assert any("nginx.conf" in v for v in services["proxy"]["volumes"])


# --- Kubernetes ---------------------------------------------------------------------------------

def render_kustomization(base: Path) -> list[dict[str, Any]]:
    """What `kustomize build` gives for this base: it lists resource files and nothing else
    (the test fails if the base grows a transformer this reading does not apply)."""
    kustomization = yaml.safe_load((base / "kustomization.yaml").read_text())
    assert set(kustomization) <= {"apiVersion", "kind", "resources"}, "render_kustomization: apply the new fields"
    docs: list[dict[str, Any]] = []
    for name in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((base / name).read_text()) if d]
    return docs


def kubernetes_validate(docs: list[dict[str, Any]], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return run(BIN / "kubernetes-validate", "--strict", rendered)


def test_every_rendered_resource_passes_kubernetes_validation(tmp_path: Path) -> None:
    docs = render_kustomization(K8S)
    result = kubernetes_validate(docs, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    # A kind without a schema is only a warning to the tool: every resource must have been checked.
    assert result.stdout.count("passed for resource") == len(docs), result.stdout + result.stderr


def test_kubernetes_validation_fails_a_broken_resource(tmp_path: Path) -> None:
    docs = render_kustomization(K8S)
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    deployments["controlplane-web"]["spec"]["replicas"] = "two"  # a wrong type
    deployments["controlplane-worker"]["spec"]["template"]["spec"]["containers"][0]["commnd"] = ["celery"]  # a typo
    result = kubernetes_validate(docs, tmp_path)
    assert result.returncode != 0
    errors = [line for line in result.stdout.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 2, result.stdout
    assert "deployment/controlplane-web" in errors[0] and "spec.replicas" in errors[0]
    assert "deployment/controlplane-worker" in errors[1] and "commnd" in errors[1]


def resources(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in render_kustomization(K8S) if d["kind"] == kind}


def test_the_base_has_probes_budgets_requests_secrets_and_a_migrate_job() -> None:
    deployments = resources("Deployment")
    budgets = resources("PodDisruptionBudget")
    assert set(deployments) == {f"controlplane-{kind}" for kind in KINDS}
    for name, deployment in deployments.items():
        assert deployment["spec"]["replicas"] == 2, name
        assert budgets[name]["spec"]["selector"] == deployment["spec"]["selector"], name
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        (container,) = pod["containers"]
        assert container["resources"]["requests"].keys() == {"cpu", "memory"}, name
        assert {"secretRef": {"name": "controlplane"}} in container["envFrom"], name
        # New code never runs on the old schema: every pod waits for the migrate Job.
        (wait,) = pod["initContainers"]
        assert "manage.py migrate --check" in wait["command"][-1], name
    web = deployments["controlplane-web"]["spec"]["template"]["spec"]["containers"][0]
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    secret = resources("Secret")["controlplane"]
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"} <= set(secret["stringData"])
    assert "controlplane-migrate" in resources("Job")


def test_the_web_processes_of_a_pod_or_container_sum_their_metrics_in_a_fresh_directory() -> None:
    pod = resources("Deployment")["controlplane-web"]["spec"]["template"]["spec"]
    (web,) = pod["containers"]
    directory = {e["name"]: e["value"] for e in web["env"]}["PROMETHEUS_MULTIPROC_DIR"]
    (mount,) = [m for m in web["volumeMounts"] if m["mountPath"] == directory]
    assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == mount["name"])
    service = compose()["services"]["web"]
    assert service["tmpfs"] == [service["environment"]["PROMETHEUS_MULTIPROC_DIR"]]


def test_a_service_monitor_can_select_the_metrics_port() -> None:
    (service,) = resources("Service").values()
    monitor = yaml.safe_load((K8S / "servicemonitor.yaml").read_text())
    labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"] and "metrics" in ports
    (endpoint,) = monitor["spec"]["endpoints"]  # scrapes with the token the pods read from the Secret
    assert endpoint["authorization"]["credentials"] == {"name": "controlplane", "key": "METRICS_TOKEN"}
    assert "METRICS_TOKEN" in resources("Secret")["controlplane"]["stringData"]


# --- The same processes everywhere --------------------------------------------------------------

def procfile() -> dict[str, str]:
    lines = (DEPLOY / "Procfile").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line and not line.startswith("#"))


def expected(command: str, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """A Procfile line as argv and the variables it sets, ``${VAR:-default}`` read from the
    container's environment (or the default); a line with ``&&`` runs under ``sh -c`` as written."""
    if "&&" in command:
        return ["sh", "-c", command], {}
    words = [re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: env.get(m.group(1), m.group(2)), w)
             for w in shlex.split(command)]
    assignments = {}
    while "=" in words[0] and re.match(r"^\w+=", words[0]):
        name, value = words.pop(0).split("=", 1)
        assignments[name] = value
    return words, assignments


def compose_processes() -> dict[str, tuple[list[str], dict[str, str]]]:
    services = compose()["services"]
    found = {kind: (services[kind]["command"], {k: str(v) for k, v in services[kind]["environment"].items()})
             for kind in KINDS}
    found["release"] = (services["migrate"]["command"], {})
    return found


def k8s_processes() -> dict[str, tuple[list[str], dict[str, str]]]:
    found = {}
    for name, workload in {**resources("Deployment"), **resources("Job")}.items():
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        kind = "release" if name == "controlplane-migrate" else name.removeprefix("controlplane-")
        found[kind] = (container["command"], {e["name"]: e["value"] for e in container.get("env", [])})
    return found


@pytest.mark.parametrize("where", [compose_processes, k8s_processes], ids=["compose", "k8s"])
def test_every_procfile_process_runs_with_the_same_command(where: Any) -> None:
    processes = where()
    assert set(processes) == set(procfile())
    for kind, line in procfile().items():
        command, env = processes[kind]
        argv, assignments = expected(line, env)
        assert command == argv, kind
        assert {k: env.get(k) for k in assignments} == assignments, kind


def test_the_procfile_reading_sees_a_changed_command() -> None:
    line = procfile()["worker"]
    command, env = k8s_processes()["worker"]
    assert expected(line, env)[0] == command
    assert expected(line.replace("--concurrency", "-c"), env)[0] != command
    assert expected(line.replace("DB_POOL_MAX_SIZE=2", "DB_POOL_MAX_SIZE=3"), env)[1] != {"DB_POOL_MAX_SIZE": "2"}
