"""Rows as a table (aligned columns, ``-o table`` / ``-o wide``) or as the API's own objects
(``-o json`` / ``-o yaml``, exactly what the server sent, for scripts)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO

import yaml

FORMATS = ("table", "wide", "json", "yaml")

Column = tuple[str, Callable[[dict[str, Any]], Any]]


def cell(value: Any, empty: str = "-") -> str:
    if value is None or value == "":
        return empty
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ",".join(cell(v) for v in value) or "-"
    return str(value).replace("\n", " ")


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str], *, empty: str = "-") -> str:
    cells = [[cell(v, empty) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "   ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    return "\n".join([line(list(headers)), *(line(r) for r in cells)])


def dump(data: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False).rstrip("\n")


def render(objects: list[dict[str, Any]], columns: Sequence[Column], fmt: str, out: TextIO) -> None:
    if fmt in ("json", "yaml"):
        out.write(dump(objects, fmt) + "\n")
        return
    if not objects:
        out.write("No resources found.\n")
        return
    out.write(table(([get(o) for _, get in columns] for o in objects), [h for h, _ in columns]) + "\n")
