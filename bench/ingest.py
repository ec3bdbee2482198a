"""Telemetry ingest benchmark: the COPY path against a per-row ORM baseline.

    CONTROLPLANE_VAR_DIR=./var .venv/bin/python -m controlplane.engines run -- .venv/bin/python bench/ingest.py

Creates a throwaway database (bench_<name>), one node with 4 modules, and
ingests batches of 1000 node samples (4000 module samples) both ways; prints
the median of a few runs and the ratio. Drops the database at the end.
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
os.environ.setdefault("TEST_DATABASE_NAME", "bench_controlplane")

import django  # noqa: E402

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from django.utils import timezone  # noqa: E402

SAMPLES = int(os.environ.get("BENCH_SAMPLES", "1000"))
RUNS = int(os.environ.get("BENCH_RUNS", "5"))


def main() -> None:
    setup_test_environment()
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        run()
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def run() -> None:
    from rest_framework.test import APIClient

    from apps.inventory.choices import FormFactor, TierKind
    from apps.inventory.models import Module, ModuleType, Node, Rack, Tier
    from apps.telemetry.choices import AgentKind
    from apps.telemetry.models import ModuleSample, ModuleStatus, NodeSample, NodeStatus
    from apps.telemetry.services import agent_token_issue, telemetry_ingest
    from apps.telemetry.validation import parse_batch

    rack = Rack.objects.create(name="bench")
    hybrid = Tier.objects.get(kind=TierKind.HYBRID_INFERENCE)
    node = Node.objects.create(hostname="bench-1", rack=rack, slot=1, tier=hybrid)
    mtype = ModuleType.objects.create(vendor="B", model="B-1", form_factor=FormFactor.M2, int8_tops=Decimal(40),
                                      power_w=10)
    modules = [Module.objects.create(serial=f"BM-{i}", module_type=mtype, node=node, slot=i) for i in range(4)]
    token, key = agent_token_issue(kind=AgentKind.NODE, node=node, actor="bench")

    def batch(run_no: int) -> dict:
        now = timezone.now()
        return {"batch_id": f"bench-{run_no:04d}", "node_samples": [
            {"time": (now - dt.timedelta(seconds=SAMPLES - i)).isoformat(), "node": node.hostname,
             "cpu_util": 0.5, "mem_util": 0.4, "load1": 1.5, "in_flight": i % 7, "threads": 100,
             "modules": [{"serial": m.serial, "util": 0.6, "temp_c": 60.0, "power_w": 9.5, "link_width": 4,
                          "link_width_expected": 4, "ecc_corrected": i, "ecc_uncorrected": 0, "errors": 0}
                         for m in modules]}
            for i in range(SAMPLES)]}

    def orm_baseline(payload: dict) -> None:
        """The same rows saved one ORM .save() each, latest state updated once per batch."""
        serial_ids = {m.serial: m.pk for m in modules}
        with transaction.atomic():
            for s in payload["node_samples"]:
                t = dt.datetime.fromisoformat(s["time"])
                NodeSample(time=t, node_id=node.pk, cpu_util=s["cpu_util"], mem_util=s["mem_util"], load1=s["load1"],
                           in_flight=s["in_flight"], threads=s["threads"]).save()
                for m in s["modules"]:
                    ModuleSample(time=t, module_id=serial_ids[m["serial"]], node_id=node.pk, util=m["util"],
                                 temp_c=m["temp_c"], power_w=m["power_w"], link_width=m["link_width"],
                                 link_width_expected=m["link_width_expected"], ecc_corrected=m["ecc_corrected"],
                                 ecc_uncorrected=m["ecc_uncorrected"], errors=m["errors"]).save()
            last = payload["node_samples"][-1]
            t = dt.datetime.fromisoformat(last["time"])
            NodeStatus.objects.update_or_create(node_id=node.pk, defaults={
                "time": t, "last_seen": timezone.now(), "cpu_util": last["cpu_util"], "mem_util": last["mem_util"],
                "load1": last["load1"], "in_flight": last["in_flight"], "threads": last["threads"]})
            for m in last["modules"]:
                ModuleStatus.objects.update_or_create(module_id=serial_ids[m["serial"]], defaults={
                    "node_id": node.pk, "time": t, "last_seen": timezone.now(), "util": m["util"],
                    "temp_c": m["temp_c"], "power_w": m["power_w"], "link_width": m["link_width"],
                    "link_width_expected": m["link_width_expected"], "ecc_corrected": m["ecc_corrected"],
                    "ecc_uncorrected": m["ecc_uncorrected"], "errors": m["errors"]})

    def timed(fn, payload: dict) -> float:  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        fn(payload)
        return time.perf_counter() - t0

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {key}")

    def http(payload: dict) -> None:
        r = client.post("/api/v1/telemetry/", payload, format="json")
        assert r.status_code == 202, r.content

    results: dict[str, list[float]] = {"validate": [], "copy": [], "http": [], "orm": []}
    for i in range(RUNS):
        results["validate"].append(timed(lambda p: parse_batch(p, token=token, now=timezone.now()), batch(i)))
        results["copy"].append(timed(lambda p: telemetry_ingest(token=token, payload=p), batch(100 + i)))
        results["http"].append(timed(http, batch(200 + i)))
        if i < 3:  # the baseline is slow; three runs are enough
            results["orm"].append(timed(orm_baseline, batch(300 + i)))
    med = {k: statistics.median(v) * 1000 for k, v in results.items()}
    rows = SAMPLES * 5
    print(f"batch: {SAMPLES} node samples + {SAMPLES * 4} module samples ({rows} rows), median of {RUNS} runs "
          f"(ORM: {len(results['orm'])})")
    print(f"  validation only               {med['validate']:8.1f} ms")
    print(f"  COPY path (validate + write)  {med['copy']:8.1f} ms  ({rows / med['copy'] * 1000:,.0f} rows/s)")
    print(f"  HTTP POST (JSON + auth + COPY){med['http']:8.1f} ms")
    print(f"  per-row ORM saves (baseline)  {med['orm']:8.1f} ms  ({rows / med['orm'] * 1000:,.0f} rows/s)")
    print(f"  ORM / COPY path               {med['orm'] / med['copy']:8.1f} x")


if __name__ == "__main__":
    main()
