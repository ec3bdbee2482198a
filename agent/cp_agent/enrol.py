"""Self-enrolment: an agent with no node key joins with a bootstrap token.

It reads the host's facts (hostname, machine id, CPU model, cores and clock, memory, ECC, NIC speed,
PCIe slots, a location hint) and discovers its modules (a vendor tool's JSON through
``--discover command:CMD``), sends them to ``POST /api/v1/enrolments/``, keeps the enrolment's id
and its own secret in the buffer dir (0600), and polls ``POST /api/v1/enrolments/{id}/claim/``
with that secret until an admin approves (the answer carries the node key once: stored 0600 as
``node.key``, used from then on, also after a restart) or rejects it. A figure the host does not
give away is sent as null (unknown): ``--facts FILE`` supplies or corrects any of them.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from agent.cp_agent import __version__
from agent.cp_agent.backoff import Backoff

log = logging.getLogger("cp_agent.enrol")

JOIN_PATH = "/api/v1/enrolments/"
CLAIM_PATH = "/api/v1/enrolments/{id}/claim/"
KEY_FILE = "node.key"
NODE_FILE = "node.json"
ENROLMENT_FILE = "enrolment.json"
DISCOVER_TIMEOUT_S = 60.0
# Host facts a --facts file may give (the join's "facts" object).
FACT_NAMES = ("cpu_model", "cpu_cores", "cpu_clock_ghz", "l3_cache_mb", "memory_gb", "memory_channels",
              "ecc_memory", "nic_kind", "nic_speed_gbps", "pcie_lanes", "pcie_slots", "cpu_power_w",
              "power_budget_w", "asset_tag")
# Module fields a discovery tool may give (the join's "modules" items).
MODULE_FIELDS = ("serial", "vendor", "model", "slot", "pcie_lanes", "firmware_version", "driver_version",
                 "framework_version")


class EnrolError(Exception):
    """The join cannot go on: the message says why; ``code`` is the agent's exit code."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


# ---- the host's facts ---------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def machine_id() -> str:
    return _read("/etc/machine-id") or _read("/var/lib/dbus/machine-id")


def _cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model"):
            return value.strip()[:128]
    return ""


def _clock_ghz() -> float | None:
    try:
        freq = psutil.cpu_freq()
    except (AttributeError, OSError, NotImplementedError):
        freq = None
    mhz = (freq.max or freq.current) if freq else 0.0
    if not mhz:
        for line in _read("/proc/cpuinfo").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "cpu MHz":
                try:
                    mhz = float(value)
                except ValueError:
                    continue
                break
    return round(mhz / 1000.0, 2) if mhz else None


def _l3_mb() -> int | None:
    size = _read("/sys/devices/system/cpu/cpu0/cache/index3/size")  # e.g. "32768K"
    if not size:
        return None
    units = {"K": 1 / 1024, "M": 1, "G": 1024}
    try:
        return round(float(size[:-1]) * units[size[-1]]) if size[-1] in units else round(int(size) / 2**20)
    except ValueError:
        return None


def _ecc() -> bool | None:
    """True when the kernel's EDAC sees a memory controller (ECC memory); None when it cannot say."""
    mc = Path("/sys/devices/system/edac/mc")
    try:
        return True if any(p.name.startswith("mc") for p in mc.iterdir()) else None
    except OSError:
        return None


def _nic_gbps() -> int | None:
    try:
        speeds = [s.speed for name, s in psutil.net_if_stats().items() if s.isup and s.speed > 0 and name != "lo"]
    except OSError:
        return None
    fastest = max(speeds, default=0) // 1000  # Mb/s -> Gb/s
    return fastest or None


def _pcie_slots() -> int | None:
    try:
        return len(list(Path("/sys/bus/pci/slots").iterdir())) or None
    except OSError:
        return None


def host_facts() -> dict[str, Any]:
    """What this host tells about itself; null where it does not (sent as unknown)."""
    tag = _read("/sys/class/dmi/id/chassis_asset_tag")
    return {
        "cpu_model": _cpu_model(),
        "cpu_cores": psutil.cpu_count(logical=False) or psutil.cpu_count() or 1,
        "cpu_clock_ghz": _clock_ghz(),
        "l3_cache_mb": _l3_mb(),
        "memory_gb": max(1, round(psutil.virtual_memory().total / 2**30)),
        "memory_channels": None,  # only the SMBIOS tables tell (root): give it in --facts
        "ecc_memory": _ecc(),
        "nic_kind": None,
        "nic_speed_gbps": _nic_gbps(),
        "pcie_lanes": None,
        "pcie_slots": _pcie_slots(),
        "cpu_power_w": None,
        "power_budget_w": None,
        "asset_tag": "" if tag.lower() in ("", "default string", "not specified", "none") else tag[:64],
    }


def load_facts_file(path: str) -> dict[str, Any]:
    """The ``--facts`` file: a JSON object of host facts that replace what the host told."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise EnrolError(f"--facts {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise EnrolError(f"--facts {path}: expected a JSON object of host facts")
    unknown = sorted(set(data) - set(FACT_NAMES))
    if unknown:
        raise EnrolError(f"--facts {path}: unknown fact {', '.join(unknown)} (known: {', '.join(FACT_NAMES)})")
    return data


# ---- the modules ----------------------------------------------------------------------------------


def discover_modules(spec: str, *, timeout: float = DISCOVER_TIMEOUT_S,
                     exporter: Any = None) -> list[dict[str, Any]]:
    """The modules a vendor tool lists: ``command:CMD`` runs CMD through /bin/sh, which prints a JSON
    list of objects (serial, vendor, model; slot, pcie_lanes, firmware_version, driver_version and
    framework_version when it knows them). ``exporter``: the exporter backend's reading through its
    mapping's [discover] table (``exporter``, an ``ExporterBackend``). ``none`` (or empty): a node
    without modules."""
    if spec in ("", "none"):
        return []
    if spec == "exporter":
        if exporter is None:
            raise EnrolError("--discover exporter: needs --backend exporter:URL and its --mapping")
        try:
            return [{k: m[k] for k in MODULE_FIELDS if k in m} for m in exporter.discover()]
        except ValueError as exc:
            raise EnrolError(f"--discover exporter: {exc}") from None
    if not spec.startswith("command:"):
        raise EnrolError(f"--discover {spec!r}: expected command:CMD, exporter or none")
    command = spec.removeprefix("command:")
    try:
        done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise EnrolError(f"--discover: {command!r} ran longer than {timeout:g} s") from exc
    if done.returncode != 0:
        raise EnrolError(f"--discover: {command!r} failed with exit code {done.returncode}: "
                         f"{done.stderr.decode(errors='replace')[-300:]}")
    try:
        found = json.loads(done.stdout)
    except ValueError as exc:
        raise EnrolError(f"--discover: {command!r} printed no JSON list: {exc}") from exc
    if not isinstance(found, list) or not all(isinstance(m, dict) for m in found):
        raise EnrolError(f"--discover: {command!r} must print a JSON list of module objects")
    modules = []
    for i, m in enumerate(found):
        missing = [k for k in ("serial", "vendor", "model") if not m.get(k)]
        if missing:
            raise EnrolError(f"--discover: module {i} has no {', '.join(missing)}")
        modules.append({k: m[k] for k in MODULE_FIELDS if k in m and m[k] is not None})
    return modules


# ---- the state kept in the buffer dir ---------------------------------------------------------------


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` readable by this user only (0600), replacing the file at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


@dataclass
class Identity:
    key: str
    hostname: str
    node: int | None


def stored_identity(buffer_dir: Path) -> Identity | None:
    """The node key an earlier enrolment stored, with its node's hostname."""
    key = _read(str(buffer_dir / KEY_FILE))
    if not key:
        return None
    try:
        node = json.loads((buffer_dir / NODE_FILE).read_text())
    except (OSError, ValueError):
        node = {}
    return Identity(key=key, hostname=str(node.get("hostname") or ""), node=node.get("node"))


# ---- joining ----------------------------------------------------------------------------------------


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    return str(body.get("detail") or body)[:600] if isinstance(body, dict) else str(body)[:300]


@dataclass
class Enroller:
    api_url: str
    bootstrap_token: str
    buffer_dir: Path
    hostname: str
    machine_id: str
    facts: dict[str, Any]
    modules: list[dict[str, Any]]
    location_hint: str = ""
    poll_s: float = 10.0
    transport: httpx.BaseTransport | None = None

    def __post_init__(self) -> None:
        self._http = httpx.Client(base_url=self.api_url.rstrip("/"), timeout=httpx.Timeout(15.0, connect=5.0),
                                  headers={"User-Agent": f"cp-agent/{__version__}"}, transport=self.transport)

    def close(self) -> None:
        self._http.close()

    def body(self) -> dict[str, Any]:
        return {"bootstrap_token": self.bootstrap_token, "hostname": self.hostname, "machine_id": self.machine_id,
                "agent_version": __version__, "location_hint": self.location_hint, "facts": self.facts,
                "modules": self.modules}

    def join(self) -> dict[str, Any]:
        """Send the join; keep its enrolment id and secret (0600). Raises EnrolError on a refusal,
        httpx.HTTPError when the API cannot be reached (try again)."""
        response = self._http.post(JOIN_PATH, json=self.body())
        if response.status_code >= 500 or response.status_code == 429:
            raise httpx.HTTPStatusError(f"{response.status_code}", request=response.request, response=response)
        if response.status_code != 201:
            raise EnrolError(f"the join was refused ({response.status_code}): {_detail(response)}")
        answer = response.json()
        enrolment = answer["enrolment"]
        saved = {"id": enrolment["id"], "secret": answer["secret"], "hostname": enrolment["hostname"]}
        _write_private(self.buffer_dir / ENROLMENT_FILE, json.dumps(saved))
        verdicts = enrolment.get("verdicts") or {}
        log.info("joined as enrolment %s (%s): %s; hard rule findings: %s", enrolment["id"], enrolment["hostname"],
                 enrolment["state"], verdicts.get("errors") or "none")
        return saved

    def claim(self, saved: dict[str, Any]) -> Identity | None:
        """One poll: the node key once approved (stored 0600), None while pending. Raises EnrolError when
        rejected or refused, httpx.HTTPError when the API cannot be reached."""
        response = self._http.post(CLAIM_PATH.format(id=saved["id"]), json={"secret": saved["secret"]})
        if response.status_code >= 500 or response.status_code == 429:
            raise httpx.HTTPStatusError(f"{response.status_code}", request=response.request, response=response)
        if response.status_code != 200:
            raise EnrolError(f"enrolment {saved['id']}: the poll was refused ({response.status_code}): "
                             f"{_detail(response)}")
        answer = response.json()
        if answer["state"] == "rejected":  # forget it: the next start (the host fixed) joins anew
            (self.buffer_dir / ENROLMENT_FILE).unlink(missing_ok=True)
            raise EnrolError(f"enrolment {saved['id']} was rejected: {answer.get('reason') or 'no reason given'}; "
                             "the next start joins again", code=3)
        if answer["state"] != "approved" or not answer.get("key"):
            return None
        identity = Identity(key=str(answer["key"]), hostname=str(answer["hostname"]), node=answer.get("node"))
        _write_private(self.buffer_dir / NODE_FILE, json.dumps({"hostname": identity.hostname, "node": identity.node,
                                                               "enrolment": saved["id"]}))
        _write_private(self.buffer_dir / KEY_FILE, identity.key)
        (self.buffer_dir / ENROLMENT_FILE).unlink(missing_ok=True)
        log.info("enrolment %s approved: node %s (#%s); its key is stored in %s", saved["id"], identity.hostname,
                 identity.node, self.buffer_dir / KEY_FILE)
        return identity

    def run(self, stop: threading.Event, backoff: Backoff) -> Identity | None:
        """Join (unless an earlier run did) and poll until approved; None when ``stop`` is set first."""
        saved: dict[str, Any] | None = None
        try:
            saved = json.loads((self.buffer_dir / ENROLMENT_FILE).read_text())
            log.info("waiting for enrolment %s to be approved", saved["id"])  # type: ignore[index]
        except (OSError, ValueError):
            saved = None
        while not stop.is_set():
            try:
                if saved is None:
                    saved = self.join()
                identity = self.claim(saved)
                backoff.reset()
                if identity is not None:
                    return identity
                wait = self.poll_s
            except httpx.HTTPError as exc:
                wait = backoff.next_delay()
                log.warning("the control plane could not be reached (%s); trying again in %.1f s", exc, wait)
            stop.wait(wait)
        return None
