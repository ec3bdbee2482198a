"""Host metrics from psutil: CPU, memory, load and OS threads."""

from __future__ import annotations

import os
from typing import Any

import psutil


class HostMetrics:
    def __init__(self) -> None:
        psutil.cpu_percent(interval=None)  # prime: the first call has no interval to measure

    def read(self) -> dict[str, Any]:
        try:
            load1 = os.getloadavg()[0]
        except (AttributeError, OSError):
            load1 = 0.0
        threads = 0
        for proc in psutil.process_iter(["num_threads"]):
            threads += int(proc.info.get("num_threads") or 0)
        return {
            "cpu_util": round(psutil.cpu_percent(interval=None) / 100.0, 4),
            "mem_util": round(psutil.virtual_memory().percent / 100.0, 4),
            "load1": round(float(load1), 2),
            "threads": threads,
        }
