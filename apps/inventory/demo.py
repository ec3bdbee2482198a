"""The demo fleet: three racks of 20 nodes over the tiers, two module types,
pins and a candidate, standby nodes, a tier-3 endpoint, and deliberate
findings for the checks (a node whose modules oversubscribe its PCIe lanes, a
standby node without ECC, a slow access node, modules on an old driver).

Idempotent: every object is looked up by its natural key first.
"""

from __future__ import annotations

import secrets
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction

from apps.accounts.services import user_ensure
from apps.audit.choices import Source
from apps.inventory import services
from apps.inventory.choices import CombinationState, EndpointKind, FormFactor, NicKind, NodeState, TierKind
from apps.inventory.models import (
    DriverRelease,
    ExternalEndpoint,
    FrameworkRelease,
    Module,
    ModuleType,
    Node,
    Rack,
    Tier,
    VersionCombination,
)

ACTOR = "seed_demo"
RACKS = 3
NODES_PER_RACK = 20
ACCESS_PER_RACK = 6
STANDBY_PER_RACK = 3
CREDENTIALS_FILE = settings.VAR_DIR / "demo-credentials.txt"


def _get_or_create(model_cls: Any, lookup: dict[str, Any], **fields: Any) -> Any:
    obj = model_cls.objects.filter(**lookup).first()
    if obj is None:
        obj = services.inventory_create(instance=model_cls(**lookup, **fields), actor=ACTOR, source=Source.SYSTEM)
    return obj


def demo_credentials() -> dict[str, str]:
    """Passwords generated on the first seed, kept under ./var/ (never in the repository)."""
    creds: dict[str, str] = {}
    if CREDENTIALS_FILE.exists():
        for line in CREDENTIALS_FILE.read_text().splitlines():
            if ":" in line:
                user, _, pw = line.strip().partition(":")
                creds[user.strip()] = pw.strip()
    if set(creds) != {"admin", "operator", "viewer"}:
        creds = {name: secrets.token_urlsafe(12) for name in ("admin", "operator", "viewer")}
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        CREDENTIALS_FILE.write_text("".join(f"  {u}: {p}\n" for u, p in creds.items()))
        CREDENTIALS_FILE.chmod(0o600)
    return creds


def seed_users() -> dict[str, str]:
    creds = demo_credentials()
    for name, password in creds.items():
        user, created = user_ensure(username=name, password=password, role=name)
        if not created and not user.check_password(password):
            user.set_password(password)
            user.save(update_fields=["password"])
    return creds


def _node_spec(rack_no: int, i: int) -> dict[str, Any]:
    access = i < ACCESS_PER_RACK
    spec: dict[str, Any] = {
        "cpu_model": "Xeon 6 6731E" if access else "EPYC 4585PX",
        "cpu_cores": 8 if access else 16,
        "cpu_clock_ghz": Decimal("3.60") if access else Decimal("3.20"),
        "l3_cache_mb": 32,
        "memory_gb": 64 if access else 128,
        "memory_channels": 8,
        "ecc_memory": True,
        "pcie_lanes": 16,
        "nic_kind": NicKind.ROCE_V2,
        "nic_speed_gbps": 100,
        "cpu_power_w": 70 if access else 65,
        "power_budget_w": 150,
        "omp_num_threads": 6 if access else 12,
        "mkl_num_threads": 6 if access else 12,
        "isolated_cores": "0-1",
        "labels": {"zone": "row-a", "rack": f"r{rack_no}"},
    }
    if rack_no == 2 and i == 3:
        spec["cpu_clock_ghz"] = Decimal("2.80")  # finding: a slow access & logic node
    if rack_no == 1 and i == 7:
        spec["pcie_lanes"] = 8  # finding: 4 modules x 4 lanes on an 8-lane board
    if rack_no == 3 and i == NODES_PER_RACK - 1:
        spec["ecc_memory"] = False  # finding: a standby node without ECC
    return spec


def _module_count(rack_no: int, i: int) -> int:
    if rack_no == 1 and i == 7:
        return 4
    return 1 + (rack_no * 7 + i * 3) % 4


@transaction.atomic
def seed_inventory_demo(*, racks: int = RACKS) -> dict[str, Any]:
    """The demo fleet on ``racks`` racks of NODES_PER_RACK nodes (benchmarks seed larger fleets)."""
    creds = seed_users()
    tiers = {t.kind: t for t in Tier.objects.all()}
    for kind, lo, hi in [(TierKind.ACCESS_LOGIC, 6, 18), (TierKind.HYBRID_INFERENCE, 10, 42),
                         (TierKind.EXTERNAL_LARGE_MODEL, 0, 0)]:
        tier = tiers[kind]
        if (tier.min_active_nodes, tier.max_active_nodes) == (0, 1000):
            services.inventory_update(instance=tier, data={"min_active_nodes": lo, "max_active_nodes": hi},
                                      actor=ACTOR, source=Source.SYSTEM)

    ax = _get_or_create(ModuleType, {"vendor": "Axon", "model": "AX-40"}, form_factor=FormFactor.M2,
                        int8_tops=Decimal("40"), power_w=10, pcie_lanes=4)
    kv = _get_or_create(ModuleType, {"vendor": "Kestrel", "model": "KV-32"}, form_factor=FormFactor.SOM,
                        int8_tops=Decimal("32"), power_w=15, pcie_lanes=4)
    ax_old = _get_or_create(DriverRelease, {"vendor": "Axon", "version": "2.2.9"})
    ax_pin = _get_or_create(DriverRelease, {"vendor": "Axon", "version": "2.3.1"})
    ax_new = _get_or_create(DriverRelease, {"vendor": "Axon", "version": "2.4.0"})
    kv_pin = _get_or_create(DriverRelease, {"vendor": "Kestrel", "version": "5.1.2"})
    fw_ax = _get_or_create(FrameworkRelease, {"name": "axon-runtime", "version": "1.18.0"})
    fw_ax_new = _get_or_create(FrameworkRelease, {"name": "axon-runtime", "version": "1.19.0"})
    fw_kv = _get_or_create(FrameworkRelease, {"name": "kestrel-rt", "version": "3.2.0"})
    pins: dict[int, tuple[str, str]] = {}
    for mtype, driver, fw, state in [(ax, ax_old, fw_ax, CombinationState.VALIDATED),
                                     (ax, ax_pin, fw_ax, CombinationState.PINNED),
                                     (ax, ax_new, fw_ax_new, CombinationState.CANDIDATE),
                                     (kv, kv_pin, fw_kv, CombinationState.PINNED)]:
        combo = _get_or_create(VersionCombination, {"module_type": mtype, "driver": driver, "framework": fw})
        if state != CombinationState.CANDIDATE and combo.state == CombinationState.CANDIDATE:
            combo = services.combination_set_state(combination=combo, state=CombinationState.VALIDATED,
                                                   actor=ACTOR, source=Source.SYSTEM, by_validation=True,
                                                   reason="demo: its vectors passed before the demo begins")
        if state == CombinationState.PINNED and combo.state != CombinationState.PINNED:
            combo = services.combination_set_state(combination=combo, state=CombinationState.PINNED,
                                                   actor=ACTOR, source=Source.SYSTEM, reason="demo: fleet default")
        if state == CombinationState.PINNED:
            pins[mtype.pk] = (driver.version, fw.version)

    _get_or_create(ExternalEndpoint, {"name": "gpu-pool-70b"}, tier=tiers[TierKind.EXTERNAL_LARGE_MODEL],
                   kind=EndpointKind.GPU_CLUSTER, url="https://gpu-pool.internal.example/v1", model="llm-70b-instruct",
                   quota_requests_per_min=6000, quota_tokens_per_min=5_000_000, latency_slo_ms=3000)

    created_nodes = 0
    to_activate: list[str] = []
    for r in range(1, racks + 1):
        rack = _get_or_create(Rack, {"name": f"rack-{r}"}, row="A", position=r, power_budget_w=6000)
        for i in range(NODES_PER_RACK):
            hostname = f"n-r{r}-{i + 1:02d}"
            if Node.objects.filter(hostname=hostname).exists():
                continue
            access = i < ACCESS_PER_RACK
            standby = i >= NODES_PER_RACK - STANDBY_PER_RACK
            # Every node starts in standby; the ones that serve are activated through the
            # node lifecycle (apps.operations.demo), like any other state change.
            node = services.inventory_create(
                instance=Node(hostname=hostname, rack=rack, slot=i + 1,
                              tier=tiers[TierKind.ACCESS_LOGIC if access else TierKind.HYBRID_INFERENCE],
                              state=NodeState.STANDBY, **_node_spec(r, i)),
                actor=ACTOR, source=Source.SYSTEM)
            created_nodes += 1
            if not standby:
                to_activate.append(hostname)
            if access:
                continue
            mtype = ax if (r + i) % 3 else kv
            driver, framework = pins[mtype.pk]
            for slot in range(_module_count(r, i)):
                if mtype is ax and r == 2 and i in (10, 11, 12):
                    driver = "2.2.9"  # finding: drift from the pin
                services.inventory_create(
                    instance=Module(serial=f"{mtype.vendor[:2].upper()}-{r}{i + 1:02d}{slot}", module_type=mtype,
                                    node=node, slot=slot, driver_version=driver, framework_version=framework,
                                    firmware_version="1.0.4"),
                    actor=ACTOR, source=Source.SYSTEM)
    return {"credentials": creds, "nodes_created": created_nodes, "nodes": Node.objects.count(),
            "modules": Module.objects.count(), "to_activate": to_activate}
