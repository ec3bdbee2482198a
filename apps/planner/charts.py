"""The planner's Plotly figure: modules needed and CPU headroom against concurrent users."""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go

from apps.planner.formulas import ArrayInputs, size_array, sweep_users


def users_figure(inputs: ArrayInputs) -> dict[str, Any]:
    """A figure dict for Plotly.react: modules (left axis) and CPU headroom % (right axis)."""
    points = sweep_users(inputs)
    users = [p[0] for p in points]
    here = size_array(inputs)
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=users, y=[p[1] for p in points], name="modules needed", mode="lines",
        line={"shape": "hv", "color": "#2f5bd3", "width": 2},
        hovertemplate="%{x:,} users: %{y} modules<extra></extra>",
    ))
    fig.add_trace(go.Scatter(
        x=users, y=[round(p[2] * 100, 2) for p in points], name="CPU headroom %", mode="lines", yaxis="y2",
        line={"color": "#2e9d5b", "width": 2},
        hovertemplate="%{x:,} users: %{y:,.0f}% headroom<extra></extra>",
    ))
    fig.add_trace(go.Scatter(
        x=[inputs.concurrent_users], y=[here.modules_needed], name="your plan", mode="markers",
        marker={"size": 11, "color": "#c0392b", "symbol": "diamond"},
        hovertemplate="%{x:,} users: %{y} modules (your plan)<extra></extra>",
    ))
    fig.update_layout(
        template="none", font={"family": "DejaVu Sans, sans-serif", "size": 12},
        margin={"l": 60, "r": 60, "t": 30, "b": 50}, height=360,
        paper_bgcolor="#ffffff", plot_bgcolor="#ffffff",
        legend={"orientation": "h", "y": 1.12, "x": 0},
        xaxis={"title": {"text": "concurrent users"}, "gridcolor": "#eef0f4", "rangemode": "tozero"},
        yaxis={"title": {"text": "modules needed"}, "gridcolor": "#eef0f4", "rangemode": "tozero"},
        yaxis2={"title": {"text": "CPU headroom (%)"}, "overlaying": "y", "side": "right", "tickmode": "auto",
                "rangemode": "tozero", "ticksuffix": "%", "zeroline": True, "zerolinecolor": "#c0392b",
                "showgrid": False},
    )
    return json.loads(fig.to_json())  # type: ignore[no-any-return]
