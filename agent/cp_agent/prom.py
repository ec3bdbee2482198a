"""Reading a local Prometheus text endpoint (a serving process, an exporter).

Parsed with ``prometheus_client.parser``; the result is an index by sample
name, so a reader can ask for every series of one metric and which metric
names the endpoint declares at all (a ``# TYPE`` line without samples counts
as declared: "known, currently no series" is not "unknown"). Names are the
sample names as they appear on the exposition lines (a counter's ``_total``
included; a counter exposed without one answers to both names).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families


@dataclass
class Series:
    labels: dict[str, str]
    value: float


@dataclass
class Exposition:
    """One scrape: series by sample name, and every name the text declares."""

    series: dict[str, list[Series]] = field(default_factory=dict)
    declared: set[str] = field(default_factory=set)

    def get(self, name: str) -> list[Series]:
        return self.series.get(name, [])

    def knows(self, name: str) -> bool:
        return name in self.series or name in self.declared


def parse(text: str) -> Exposition:
    """Parse exposition text. Raises ValueError on text that is not the Prometheus format."""
    out = Exposition()
    for family in text_string_to_metric_families(text):
        out.declared.add(family.name)
        total = family.name + "_total"
        if family.type == "counter":
            out.declared.add(total)
        for sample in family.samples:
            value = float(sample.value)
            if math.isnan(value):
                continue
            series = Series(dict(sample.labels), value)
            out.series.setdefault(sample.name, []).append(series)
            if family.type == "counter" and sample.name == total:
                # The parser names every counter sample <family>_total, whether or not the line had the
                # suffix (DCGM_FI_DEV_PCIE_REPLAY_COUNTER has none): answer to the name as exposed too.
                out.series.setdefault(family.name, []).append(series)
    return out


def scrape(http: httpx.Client, url: str) -> Exposition:
    """GET ``url`` and parse it. Raises httpx.HTTPError or ValueError."""
    response = http.get(url, headers={"Accept": "text/plain;version=0.0.4"})
    response.raise_for_status()
    return parse(response.text)

