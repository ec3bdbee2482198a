"""The ``exporter`` module backend: module metrics from a Prometheus exporter the
node already runs (NVIDIA's dcgm-exporter, an NPU vendor's exporter), mapped to
the telemetry contract's module fields by a mapping file.

A mapping (TOML; ``mappings/dcgm-exporter.toml`` is shipped) names:

- ``module_label``: the label whose values are the modules (``UUID``, ``gpu``,
  ``npu_id``…); one module per value. The module's serial is the value, or the
  serial ``--module-alias VALUE=SERIAL`` gives it.
- ``missing_at_or_above`` (optional): values at or above it are an exporter's
  "no data" sentinels, reported as missing.
- ``[fields]``: per contract field (``util``, ``temp_c``, ``power_w``,
  ``link_width``, ``link_width_expected``, ``ecc_corrected``,
  ``ecc_uncorrected``, ``errors``) a table with ``metric`` (a sample name, or a
  list of them), and optionally ``scale`` (multiplier, e.g. 0.01 for percent),
  ``match`` (labels a series must carry, e.g. ``{ type = "core" }``),
  ``aggregate`` (how several series of one module combine: ``sum``, ``mean``,
  ``max``, ``min``; the default fits the field: mean utilisation, hottest
  temperature, summed power and counters, narrowest link) or ``value`` (a
  constant instead of a metric).

- ``[discover]`` (optional): how a joining node lists its modules from the
  exporter (``--discover exporter``): per join module field (``vendor``,
  ``model``, ``slot``, ``pcie_lanes``, ``firmware_version``,
  ``driver_version``, ``framework_version``) a table with ``label`` (the
  module's series carry it, e.g. ``modelName``), ``value`` (a constant, e.g.
  the vendor) or ``field`` (a mapped field's reading, e.g. the lanes from
  ``link_width_expected``). ``vendor`` and ``model`` are required there.

A field the mapping names but the endpoint lacks for a module is reported as
missing (``null``), never as zero, and logged once (again if it comes back and
goes again). A value outside the contract's range is reported as missing too,
logged once, rather than have the control plane refuse the whole batch. When
the endpoint cannot be read, the modules last seen are reported with every
field missing.
"""

from __future__ import annotations

import logging
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agent.cp_agent import prom
from agent.cp_agent.once import Once

log = logging.getLogger("cp_agent.exporter")

MAPPINGS_DIR = Path(__file__).with_name("mappings")

# Contract fields: (kind, lowest, highest, default aggregate). Ranges as docs/agent-protocol.md.
FIELDS: dict[str, tuple[str, float, float, str]] = {
    "util": ("fraction", 0.0, 1.0, "mean"),
    "temp_c": ("float", -60.0, 250.0, "max"),
    "power_w": ("float", 0.0, math.inf, "sum"),
    "link_width": ("int", 0, 32, "min"),
    "link_width_expected": ("int", 0, 32, "max"),
    "ecc_corrected": ("int", 0, 2**63 - 1, "sum"),
    "ecc_uncorrected": ("int", 0, 2**63 - 1, "sum"),
    "errors": ("int", 0, 2**63 - 1, "sum"),
}
AGGREGATES = ("sum", "mean", "max", "min")
# Join module fields a mapping's [discover] table may fill, and whether each is a whole number.
DISCOVER_FIELDS: dict[str, bool] = {"vendor": False, "model": False, "slot": True, "pcie_lanes": True,
                                    "firmware_version": False, "driver_version": False, "framework_version": False}
UTIL_SLACK = 0.05  # a utilisation up to 5 % over 1 (rounding in the exporter) is read as 1


@dataclass(frozen=True)
class FieldRule:
    name: str
    metrics: tuple[str, ...] = ()
    scale: float = 1.0
    match: tuple[tuple[str, str], ...] = ()
    aggregate: str = "sum"
    value: float | None = None


@dataclass(frozen=True)
class DiscoverRule:
    """Where a joining module's field comes from: one of a label, a constant or a mapped field."""

    name: str
    label: str = ""
    value: str | int | None = None
    field: str = ""


@dataclass(frozen=True)
class Mapping:
    exporter: str
    module_label: str
    rules: dict[str, FieldRule]
    missing_at_or_above: float | None = None
    source: str = ""
    discover: dict[str, DiscoverRule] = field(default_factory=dict)

    def metrics(self) -> set[str]:
        return {m for r in self.rules.values() for m in r.metrics}


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: must be a number")
    return float(value)


def parse_mapping(data: dict[str, Any], *, source: str = "") -> Mapping:
    """Check a mapping's content. Raises ValueError naming the bad key."""
    label = data.get("module_label")
    if not isinstance(label, str) or not label:
        raise ValueError("module_label: required, the label whose values are the modules (e.g. \"UUID\")")
    missing_at = data.get("missing_at_or_above")
    fields = data.get("fields")
    if not isinstance(fields, dict) or not fields:
        raise ValueError("fields: required, a table of contract field = { metric = ... }")
    rules: dict[str, FieldRule] = {}
    for name, spec in fields.items():
        where = f"fields.{name}"
        if name not in FIELDS:
            raise ValueError(f"{where}: not a module field; one of {', '.join(FIELDS)}")
        if not isinstance(spec, dict):
            raise ValueError(f"{where}: must be a table, e.g. {{ metric = \"NAME\" }}")
        extra = set(spec) - {"metric", "scale", "match", "aggregate", "value"}
        if extra:
            raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
        metric = spec.get("metric")
        metrics = (metric,) if isinstance(metric, str) else tuple(metric or ())
        if not all(isinstance(m, str) and m for m in metrics):
            raise ValueError(f"{where}.metric: a metric name or a list of them")
        value = spec.get("value")
        if bool(metrics) == (value is not None):
            raise ValueError(f"{where}: give either metric or value")
        match = spec.get("match", {})
        if not isinstance(match, dict) or not all(isinstance(v, str) for v in match.values()):
            raise ValueError(f"{where}.match: a table of label = \"value\"")
        aggregate = spec.get("aggregate", FIELDS[name][3])
        if aggregate not in AGGREGATES:
            raise ValueError(f"{where}.aggregate: one of {', '.join(AGGREGATES)}")
        rules[name] = FieldRule(
            name=name, metrics=metrics, scale=_number(spec.get("scale", 1.0), f"{where}.scale"),
            match=tuple(sorted(match.items())), aggregate=aggregate,
            value=None if value is None else _number(value, f"{where}.value"))
    return Mapping(exporter=str(data.get("exporter") or source), module_label=label, rules=rules,
                   missing_at_or_above=None if missing_at is None else _number(missing_at, "missing_at_or_above"),
                   source=source, discover=_parse_discover(data.get("discover"), rules))


def _parse_discover(data: Any, rules: dict[str, FieldRule]) -> dict[str, DiscoverRule]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError("discover: must be a table of join module field = { label | value | field = ... }")
    out: dict[str, DiscoverRule] = {}
    for name, spec in data.items():
        where = f"discover.{name}"
        if name not in DISCOVER_FIELDS:
            raise ValueError(f"{where}: not a join module field; one of {', '.join(DISCOVER_FIELDS)}")
        if not isinstance(spec, dict) or len(set(spec) & {"label", "value", "field"}) != 1 or set(spec) - {
                "label", "value", "field"}:
            raise ValueError(f"{where}: a table with exactly one of label, value or field")
        label, value, mapped = spec.get("label", ""), spec.get("value"), spec.get("field", "")
        if "label" in spec and (not isinstance(label, str) or not label):
            raise ValueError(f"{where}.label: a label name")
        if "value" in spec and (isinstance(value, bool) or not isinstance(value, (str, int)) or value == ""):
            raise ValueError(f"{where}.value: a text or a whole number")
        if "field" in spec and mapped not in rules:
            raise ValueError(f"{where}.field: a field of [fields] ({', '.join(rules) or 'none mapped'})")
        out[name] = DiscoverRule(name=name, label=label, value=value, field=mapped)
    if out and not {"vendor", "model"} <= set(out):
        raise ValueError("discover: vendor and model are required (a label or a value each)")
    return out


def load_mapping(name_or_path: str) -> Mapping:
    """A shipped mapping by name (``dcgm-exporter``) or a TOML file. Raises ValueError."""
    path = Path(name_or_path)
    shipped = MAPPINGS_DIR / f"{name_or_path}.toml"
    if not path.is_file() and "/" not in name_or_path and shipped.is_file():
        path = shipped
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        known = ", ".join(sorted(p.stem for p in MAPPINGS_DIR.glob("*.toml")))
        raise ValueError(f"mapping {name_or_path!r}: {exc.strerror or exc} (shipped mappings: {known})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"mapping {path}: not valid TOML: {exc}") from None
    try:
        return parse_mapping(data, source=str(path))
    except ValueError as exc:
        raise ValueError(f"mapping {path}: {exc}") from None


def _natural(value: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", value)]


def _combine(values: list[float], how: str) -> float:
    if how == "mean":
        return sum(values) / len(values)
    if how == "max":
        return max(values)
    if how == "min":
        return min(values)
    return sum(values)


@dataclass
class ExporterBackend:
    """Module metrics from ``url`` through ``mapping``."""

    url: str
    mapping: Mapping
    aliases: dict[str, str] = field(default_factory=dict)
    known_serials: list[str] = field(default_factory=list)
    timeout: float = 2.0
    transport: httpx.BaseTransport | None = None
    name: str = "exporter"

    def __post_init__(self) -> None:
        self._http = httpx.Client(timeout=httpx.Timeout(self.timeout), transport=self.transport)
        self._once = Once(log)
        self._last_modules: list[str] = []
        for name in FIELDS:
            if name not in self.mapping.rules:
                log.warning("mapping %s names nothing for %s: reported as missing (null)", self.mapping.source, name)

    # -- ModuleBackend ----------------------------------------------------------------------------
    def modules(self) -> list[str]:
        return list(self._last_modules)

    def read(self) -> list[dict[str, Any]]:
        try:
            exposition = prom.scrape(self._http, self.url)
        except (httpx.HTTPError, ValueError) as exc:
            self._once.say("unreachable", logging.WARNING, "exporter %s unreadable (%s: %s); reporting every "
                           "module field as missing until it answers", self.url, type(exc).__name__, exc)
            return [{"serial": s, **dict.fromkeys(FIELDS)} for s in self._last_modules]
        if self._once.clear("unreachable"):
            log.warning("exporter %s answers again", self.url)
        return self.map(exposition)

    def discover(self) -> list[dict[str, Any]]:
        """The node's modules as a join lists them, from one reading of the exporter through the mapping's
        [discover] table. Raises ValueError (no such table, the endpoint unreadable, a field it lacks)."""
        rules = self.mapping.discover
        if not rules:
            raise ValueError(f"mapping {self.mapping.source or self.mapping.exporter} has no [discover] table: "
                             "it cannot say which vendor and model the modules are")
        try:
            exposition = prom.scrape(self._http, self.url)
        except (httpx.HTTPError, ValueError) as exc:
            raise ValueError(f"exporter {self.url} unreadable: {type(exc).__name__}: {exc}") from None
        label = self.mapping.module_label
        labels: dict[str, dict[str, str]] = {}
        for metric in sorted(self.mapping.metrics()):
            for s in exposition.get(metric):
                if s.labels.get(label):
                    labels.setdefault(s.labels[label], {}).update(s.labels)
        readings = {r["serial"]: r for r in self.map(exposition)}
        out = []
        for value in sorted(labels, key=_natural):
            serial = self.aliases.get(value, value)
            module: dict[str, Any] = {"serial": serial}
            for name, rule in rules.items():
                got: Any = rule.value if rule.value is not None else (
                    labels[value].get(rule.label) if rule.label else readings.get(serial, {}).get(rule.field))
                if got is None or got == "":
                    raise ValueError(f"module {serial} ({label}={value}): no "
                                     + (f"label {rule.label}" if rule.label else f"{rule.field} reading")
                                     + f" for its {name}")
                if DISCOVER_FIELDS[name]:
                    try:
                        got = int(float(got))
                    except (TypeError, ValueError):
                        raise ValueError(f"module {serial}: {name} {got!r} is not a whole number") from None
                module[name] = got if DISCOVER_FIELDS[name] else str(got)
            out.append(module)
        return out

    def run_vector(self, model: bytes, inputs: dict[str, Any]) -> list[Any]:
        raise NotImplementedError("the exporter backend reads metrics; it has no runtime to run vectors on")

    def close(self) -> None:
        self._http.close()

    # -- mapping ----------------------------------------------------------------------------------
    def map(self, exposition: prom.Exposition) -> list[dict[str, Any]]:
        label = self.mapping.module_label
        values: set[str] = set()
        for metric in self.mapping.metrics():
            values.update(s.labels[label] for s in exposition.get(metric) if s.labels.get(label))
        out = []
        for value in sorted(values, key=_natural):
            serial = self.aliases.get(value, value)
            if self.known_serials and serial not in self.known_serials:
                self._once.say(f"stranger:{serial}", logging.WARNING,
                               "exporter reports a module %s=%s that the control plane does not list for this "
                               "node; not reported (add it to the inventory, or map it with --module-alias %s=SERIAL)",
                               label, value, value)
                continue
            record: dict[str, Any] = {"serial": serial}
            for name in FIELDS:
                rule = self.mapping.rules.get(name)
                record[name] = None if rule is None else self._field(exposition, rule, value, serial)
            out.append(record)
        self._last_modules = [r["serial"] for r in out]
        return out

    def _field(self, exposition: prom.Exposition, rule: FieldRule, module: str, serial: str) -> Any:
        key = f"{rule.name}:{serial}"
        if rule.value is not None:
            return self._checked(rule.name, rule.value, serial)
        label = self.mapping.module_label
        found: list[float] = []
        for metric in rule.metrics:
            for s in exposition.get(metric):
                if s.labels.get(label) != module or any(s.labels.get(k) != v for k, v in rule.match):
                    continue
                if self.mapping.missing_at_or_above is not None and s.value >= self.mapping.missing_at_or_above:
                    continue  # the exporter's "no data" sentinel
                found.append(s.value)
        if not found:
            self._once.say(f"missing:{key}", logging.WARNING,
                           "exporter has no %s series for module %s (%s=%s); %s reported as missing (null)",
                           " or ".join(rule.metrics), serial, label, module, rule.name)
            return None
        if self._once.clear(f"missing:{key}"):
            log.warning("exporter has %s for module %s again", rule.name, serial)
        return self._checked(rule.name, _combine(found, rule.aggregate) * rule.scale, serial)

    def _checked(self, name: str, value: float, serial: str) -> Any:
        kind, lo, hi, _ = FIELDS[name]
        if kind == "fraction" and hi < value <= hi + UTIL_SLACK:
            value = hi
        if not math.isfinite(value) or value < lo or value > hi:
            self._once.say(f"range:{name}:{serial}", logging.WARNING,
                           "module %s: %s = %g is outside %g..%g; reported as missing (null)", serial, name, value,
                           lo, hi)
            return None
        self._once.clear(f"range:{name}:{serial}")
        if kind == "int":
            return int(round(value))
        return round(value, 4)
