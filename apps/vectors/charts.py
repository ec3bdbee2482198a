"""The /versions/ chart: per module type, the pass rate and the worst error per operator
over time, one point per finished run."""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go

COLOURS = ["#2f5bd3", "#2e9d5b", "#c0392b", "#d9a400", "#7b4fd6", "#e07b00", "#3a8fb7", "#444b57"]


def operator_figure(points: list[dict[str, Any]]) -> dict[str, Any]:
    """``points``: {finished_at, run, operator, passed, judged, worst} per (run, operator).
    Pass rate (left axis, % of the cases that ran) as lines, worst abs error (right) as markers."""
    fig = go.Figure()
    operators = sorted({p["operator"] for p in points})
    for i, op in enumerate(operators):
        mine = sorted((p for p in points if p["operator"] == op), key=lambda p: p["finished_at"])
        colour = COLOURS[i % len(COLOURS)]
        fig.add_trace(go.Scatter(
            x=[p["finished_at"].isoformat() for p in mine],
            y=[round(100.0 * p["passed"] / p["judged"], 1) if p["judged"] else None for p in mine],
            name=f"{op} pass %", mode="lines+markers", line={"color": colour, "width": 2},
            customdata=[p["run"] for p in mine],
            hovertemplate=f"{op}: %{{y}}% pass (run #%{{customdata}})<extra></extra>"))
        fig.add_trace(go.Scatter(
            x=[p["finished_at"].isoformat() for p in mine], y=[p["worst"] for p in mine], yaxis="y2",
            name=f"{op} worst error", mode="markers", marker={"color": colour, "symbol": "x", "size": 8},
            hovertemplate=f"{op}: worst abs error %{{y}}<extra></extra>"))
    fig.update_layout(
        template="none", font={"family": "DejaVu Sans, sans-serif", "size": 12},
        margin={"l": 60, "r": 60, "t": 30, "b": 40}, height=300, paper_bgcolor="#ffffff", plot_bgcolor="#ffffff",
        legend={"orientation": "h", "y": 1.2, "x": 0},
        yaxis={"title": {"text": "pass rate (%)"}, "range": [0, 105], "gridcolor": "#eef0f4"},
        yaxis2={"title": {"text": "worst abs error"}, "overlaying": "y", "side": "right", "rangemode": "tozero",
                "showgrid": False},
        xaxis={"gridcolor": "#eef0f4"},
    )
    return json.loads(fig.to_json())  # type: ignore[no-any-return]
