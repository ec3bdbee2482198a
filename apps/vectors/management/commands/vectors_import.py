"""``manage.py vectors_import onnx-node --ops QLinearMatMul ...``: import public conformance
cases as a published suite (idempotent: the same cases again change nothing)."""

from __future__ import annotations

from typing import Any

import onnx
import onnxruntime
from django.core.management.base import BaseCommand, CommandError

from apps.audit.choices import Source
from apps.vectors.services import suite_import
from apps.vectors.sources import INT8_OPERATORS, model_int8_cases, onnx_node_cases

SOURCES = ("onnx-node", "model-int8")


class Command(BaseCommand):
    help = "Import regression test vectors from a public source as a published suite."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("source", choices=SOURCES, help="onnx-node: the onnx package's operator test cases; "
                            "model-int8: a small float model quantised with onnxruntime.quantization")
        parser.add_argument("--ops", nargs="+", default=list(INT8_OPERATORS),
                            help=f"operators whose cases to import (default: {' '.join(INT8_OPERATORS)})")
        parser.add_argument("--suite", default="", help="suite name (default onnx-int8, or model-int8)")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["source"] == "model-int8":
            specs = list(model_int8_cases())
            suite, created = suite_import(
                name=opts["suite"] or "model-int8", specs=specs, actor="vectors_import", source=Source.SYSTEM,
                description="a small float model quantised to INT8, judged against its float outputs",
                provenance={"source": "model-int8", "onnxruntime_version": onnxruntime.__version__})
            verb = "imported" if created else "already present:"
            self.stdout.write(f"{verb} suite {suite} with {len(specs)} vector(s) (id {suite.pk})")
            return
        specs = list(onnx_node_cases(opts["ops"]))
        if not specs:
            raise CommandError(f"no onnx node case uses {', '.join(opts['ops'])}")
        suite, created = suite_import(
            name=opts["suite"] or "onnx-int8", specs=specs, actor="vectors_import", source=Source.SYSTEM,
            description=f"onnx {onnx.__version__} node conformance cases of {', '.join(opts['ops'])}",
            provenance={"source": "onnx-node", "onnx_version": onnx.__version__, "operators": list(opts["ops"])},
        )
        verb = "imported" if created else "already present:"
        self.stdout.write(f"{verb} suite {suite} with {len(specs)} vector(s) (id {suite.pk})")
