"""Plotly figures of the live dashboard, built in Python (plotly.graph_objects) and
sent as JSON: embedded in the page for the first render, returned by the figures
API on a time-range change, and patched in the browser with Plotly.react as
snapshots arrive. Traces the browser patches carry ``meta`` saying what they show.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import plotly.graph_objects as go
from django.utils import timezone

import apps.telemetry.selectors.series as telemetry
from apps.inventory.choices import NodeState
from apps.telemetry.choices import Stage

STAGE_COLOURS = {
    "perception": "#5b6ee1", "intent": "#2e9d5b", "planning": "#d9a400",
    "tool_call": "#e07b00", "generation": "#c0392b", "memory_update": "#7a5cc7",
}
TIER_COLOURS = ["#2f5bd3", "#2e9d5b", "#c0392b", "#7a5cc7"]
PERCENTILES = [("p50_ms", "p50"), ("p95_ms", "p95"), ("p99_ms", "p99")]
STATE_ORDER = [s.value for s in NodeState]

# The rack heat map's metrics: the field of a snapshot node row, scale and colours.
RACK_METRICS: dict[str, dict[str, Any]] = {
    "cpu": {"label": "CPU utilisation", "field": "cpu", "zmin": 0, "zmax": 1, "format": "pct",
            "colorscale": [[0, "#eef3fb"], [0.5, "#f2c14e"], [1, "#c0392b"]]},
    "module_util": {"label": "Module utilisation", "field": "module_util", "zmin": 0, "zmax": 1, "format": "pct",
                    "colorscale": [[0, "#eef3fb"], [0.5, "#5b8def"], [1, "#1c2f80"]]},
    "temp_c": {"label": "Module temperature (max, °C)", "field": "temp_c", "zmin": 30, "zmax": 95,
               "format": "num", "colorscale": [[0, "#e6f4ea"], [0.55, "#f2c14e"], [1, "#8e1b10"]]},
    "power_w": {"label": "Module power (sum, W)", "field": "power_w", "zmin": 0, "zmax": 120,
                "format": "num", "colorscale": [[0, "#f3f0fb"], [0.5, "#a98ee0"], [1, "#3b2480"]]},
    "state": {"label": "Node state", "field": "state", "zmin": -0.5, "zmax": len(STATE_ORDER) - 0.5,
              "format": "state", "states": STATE_ORDER,
              "colorscale": [c for i, s in enumerate(STATE_ORDER) for c in (
                  [i / len(STATE_ORDER), NodeState(s).colour],
                  [(i + 1) / len(STATE_ORDER), NodeState(s).colour])]},
}


# Time ticks as precise as their spacing: ticks 15 s apart read 22:50:15, 22:50:30 (never 22:50 four
# times); a day apart, the date.
TIME_TICKS = [
    {"dtickrange": [None, 60_000], "value": "%H:%M:%S"},
    {"dtickrange": [60_000, 86_400_000], "value": "%H:%M"},
    {"dtickrange": [86_400_000, None], "value": "%b %d"},
]
NO_DATA = "no data yet: rollups every minute"


def as_json(fig: go.Figure) -> dict[str, Any]:
    """The figure as plain JSON (plotly's encoder: datetimes to ISO strings)."""
    return dict(json.loads(fig.to_json()))


def _layout(fig: go.Figure, *, height: int = 330, ytitle: str = "", yformat: str = "",
            hovermode: str = "x unified", **extra: Any) -> None:
    fig.update_layout(
        template="none", font={"family": "DejaVu Sans, sans-serif", "size": 12},
        margin={"l": 56, "r": 16, "t": 16, "b": 40}, height=height,
        paper_bgcolor="#ffffff", plot_bgcolor="#ffffff", hovermode=hovermode,
        legend={"orientation": "h", "y": -0.16, "x": 0, "yanchor": "top", "font": {"size": 11}},
        xaxis={"gridcolor": "#eef0f4", "type": "date", "tickformatstops": TIME_TICKS, "hoverformat": "%H:%M:%S"},
        yaxis={"title": {"text": ytitle}, "gridcolor": "#eef0f4", "rangemode": "tozero", "tickformat": yformat},
        uirevision="keep", **extra,
    )


def _tier_colour(i: int) -> str:
    return TIER_COLOURS[i % len(TIER_COLOURS)]


def queue_figure(series: dict[str, Any], tiers: list[dict[str, Any]]) -> dict[str, Any]:
    """Queue depth per tier: per-minute mean from the rollups, and a live tail of the
    newest value per snapshot (appended in the browser)."""
    fig = go.Figure()
    by_kind = {t["tier"]: t for t in series["tiers"]}
    for i, tier in enumerate(tiers):
        data = by_kind.get(tier["kind"], {"points": []})
        colour = _tier_colour(i)
        fig.add_trace(go.Scatter(
            x=[p["minute"] for p in data["points"]], y=[p["queue_depth_mean"] for p in data["points"]],
            name=tier["name"], legendgroup=str(tier["id"]), mode="lines", line={"color": colour, "width": 2},
            hovertemplate="%{y:.1f} (1-min mean)", meta={"tier_id": tier["id"], "role": "history"}))
        fig.add_trace(go.Scatter(
            # one legend entry per tier (the card's title says "1-min mean and live"): fewer legend rows
            x=[], y=[], name=f"{tier['name']} (live)", legendgroup=str(tier["id"]), showlegend=False,
            mode="lines+markers",
            line={"color": colour, "width": 1, "dash": "dot"}, marker={"size": 3},
            meta={"tier_id": tier["id"], "role": "live", "field": "queue_depth"}))
    _layout(fig, ytitle="requests queued")
    return as_json(fig)


def utilisation_figure(util: dict[int, dict[str, list[Any]]], tiers: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean CPU (solid) and module (dashed) utilisation per tier, per minute."""
    fig = go.Figure()
    for i, tier in enumerate(tiers):
        data = util.get(tier["id"], {"cpu": [], "module": []})
        colour = _tier_colour(i)
        fig.add_trace(go.Scatter(x=[m for m, _ in data["cpu"]], y=[v for _, v in data["cpu"]],
                                 name=f"{tier['name']} CPU", mode="lines", line={"color": colour, "width": 2},
                                 meta={"tier_id": tier["id"], "role": "history"}))
        if data["module"]:
            fig.add_trace(go.Scatter(x=[m for m, _ in data["module"]], y=[v for _, v in data["module"]],
                                     name=f"{tier['name']} modules", mode="lines",
                                     line={"color": colour, "width": 2, "dash": "dash"},
                                     meta={"tier_id": tier["id"], "role": "history"}))
    _layout(fig, ytitle="utilisation", yformat=".0%")
    fig.update_yaxes(range=[0, 1], rangemode="normal")
    return as_json(fig)


def latency_figure(stages: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-stage latency over time (``stages``: [{stage, points}], one tier's or the fleet's merged);
    buttons switch between p50, p95 and p99. Points merged from the gateway's summaries rather than
    the nodes' histograms say "approximate" when hovered."""
    points = {s["stage"]: s["points"] for s in stages}
    fig = go.Figure()
    for key, label in PERCENTILES:
        for stage in Stage.values:
            pts = points.get(stage, [])
            fig.add_trace(go.Scatter(
                x=[p["minute"] for p in pts], y=[p[key] for p in pts], name=f"{stage} {label}", mode="lines",
                line={"color": STAGE_COLOURS[stage], "width": 2}, visible=key == "p95_ms",
                customdata=["" if p.get("exact") else " (approximate)" for p in pts],
                hovertemplate=f"{stage} {label} %{{y:.1f}} ms%{{customdata}}<extra></extra>",
                meta={"stage": stage, "pct": label}))
    n = len(Stage.values)
    buttons = [{"label": label, "method": "update",
                "args": [{"visible": [j // n == i for j in range(n * len(PERCENTILES))]}]}
               for i, (_, label) in enumerate(PERCENTILES)]
    _layout(fig, ytitle="ms", height=350, updatemenus=[{
        "type": "buttons", "direction": "right", "active": 1, "x": 1, "xanchor": "right", "y": 1.18,
        "yanchor": "top", "buttons": buttons, "pad": {"r": 0, "t": 0}, "font": {"size": 11}}])
    fig.update_layout(margin={"t": 40})
    return as_json(fig)


def breakdown_figure(tiers: list[dict[str, Any]], pct: str = "p50_ms") -> dict[str, Any]:
    """Where a request's time goes: per tier, the newest latency of each stage stacked
    (patched in the browser from every snapshot)."""
    shown = [t for t in tiers if t["stages"]] or tiers
    names = [t["name"] for t in shown]
    fig = go.Figure()
    for stage in Stage.values:
        xs = []
        for t in shown:
            hit = next((s for s in t["stages"] if s["stage"] == stage), None)
            xs.append(hit[pct] if hit else 0)
        fig.add_trace(go.Bar(x=xs, y=names, name=stage, orientation="h", marker={"color": STAGE_COLOURS[stage]},
                             meta={"stage": stage, "tier_ids": [t["id"] for t in shown], "pct": pct},
                             hovertemplate="%{y}: " + stage + " %{x:.0f} ms<extra></extra>"))
    _layout(fig, height=max(300, 120 + 45 * len(names)), barmode="stack", hovermode="closest")
    fig.update_xaxes(type="linear", title={"text": "ms (newest stage summaries)"})
    fig.update_yaxes(autorange="reversed", title={"text": ""}, rangemode="normal", automargin=True, type="category")
    fig.update_layout(legend={"traceorder": "normal", "y": 1.02, "yanchor": "bottom"}, margin={"t": 34, "b": 44})
    return as_json(fig)


def rack_figure(nodes: list[list[Any]], fields: list[str], metric: str = "cpu") -> dict[str, Any]:
    """Nodes by rack (columns) and slot (rows), coloured by ``metric``; the browser
    recolours it from each snapshot and when the metric changes."""
    spec = RACK_METRICS[metric]
    ix = {f: i for i, f in enumerate(fields)}
    racks = sorted({r[ix["rack"]] for r in nodes})
    slots = sorted({r[ix["slot"]] for r in nodes})
    z: list[list[Any]] = [[None] * len(racks) for _ in slots]
    ids: list[list[Any]] = [[None] * len(racks) for _ in slots]
    text: list[list[str]] = [[""] * len(racks) for _ in slots]
    for r in nodes:
        y, x = slots.index(r[ix["slot"]]), racks.index(r[ix["rack"]])
        value = r[ix[spec["field"]]]
        z[y][x] = STATE_ORDER.index(value) if metric == "state" else value
        ids[y][x] = r[ix["id"]]
        text[y][x] = f"{r[ix['hostname']]} · {r[ix['state']]}"
    fig = go.Figure(go.Heatmap(
        x=racks, y=slots, z=z, customdata=ids, text=text, zmin=spec["zmin"], zmax=spec["zmax"],
        colorscale=spec["colorscale"], xgap=3, ygap=3, hoverongaps=False,
        hovertemplate="%{text}<br>" + spec["label"] + ": %{z}<extra></extra>",
        colorbar={"title": {"text": spec["label"], "side": "right"}, "thickness": 12},
        meta={"metric": metric}))
    _layout(fig, height=max(360, 30 + 26 * len(slots)), hovermode="closest")
    fig.update_xaxes(type="category", side="top", title={"text": ""}, gridcolor="rgba(0,0,0,0)")
    fig.update_yaxes(type="category", autorange="reversed", title={"text": "slot"}, rangemode="normal",
                     gridcolor="rgba(0,0,0,0)")
    fig.update_layout(margin={"t": 40, "l": 50, "r": 20, "b": 20})
    return as_json(fig)


def node_figure(history: dict[str, Any]) -> dict[str, Any]:
    """A node's CPU and memory utilisation (left) and requests in flight (right) per minute."""
    pts = history["points"]
    x = [p["minute"] for p in pts]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=[p["cpu_util_mean"] for p in pts], name="CPU", mode="lines",
                             line={"color": "#2f5bd3", "width": 2}))
    fig.add_trace(go.Scatter(x=x, y=[p["mem_util_mean"] for p in pts], name="memory", mode="lines",
                             line={"color": "#7a5cc7", "width": 2}))
    fig.add_trace(go.Scatter(x=x, y=[p["in_flight_mean"] for p in pts], name="in flight", mode="lines",
                             yaxis="y2", line={"color": "#e07b00", "width": 2, "dash": "dot"}))
    _layout(fig, ytitle="utilisation", yformat=".0%")
    # Requests in flight are counted: whole-number ticks on their own axis (not synced to the
    # utilisation grid, which gave 0.9 / 1.9 / 2.8), a step of one while the counts are small
    # (Plotly's own step would be 0.5 there), and at least 0–4 so a quiet node's axis is readable.
    peak = max((p["in_flight_mean"] or 0 for p in pts), default=0)
    fig.update_layout(yaxis={"range": [0, 1], "rangemode": "normal"},
                      yaxis2={"overlaying": "y", "side": "right", "showgrid": False, "tickmode": "auto",
                              "range": [0, max(4.0, peak * 1.1)], "dtick": 1 if peak <= 8 else None,
                              "tickformat": ",d", "title": {"text": "in flight"}}, margin={"r": 56})
    return as_json(fig)


def modules_figure(history: dict[str, Any]) -> dict[str, Any]:
    """Each module's utilisation (left) and max temperature (right, dotted) per minute."""
    fig = go.Figure()
    for i, m in enumerate(history["modules"]):
        x = [p["minute"] for p in m["points"]]
        colour = TIER_COLOURS[i % len(TIER_COLOURS)]
        fig.add_trace(go.Scatter(x=x, y=[p["util_mean"] for p in m["points"]], name=f"{m['serial']} util",
                                 mode="lines", line={"color": colour, "width": 2}))
        fig.add_trace(go.Scatter(x=x, y=[p["temp_c_max"] for p in m["points"]], name=f"{m['serial']} °C",
                                 mode="lines", yaxis="y2", line={"color": colour, "width": 1, "dash": "dot"}))
    _layout(fig, ytitle="utilisation", yformat=".0%")
    fig.update_layout(yaxis={"range": [0, 1], "rangemode": "normal"},
                      yaxis2={"overlaying": "y", "side": "right", "showgrid": False, "title": {"text": "°C"},
                              "tickformat": ".0f"},
                      margin={"r": 56})
    return as_json(fig)


# ---- the figures of each page --------------------------------------------------------------------


def _say_when_empty(fig: dict[str, Any], *, minutes: int, now: dt.datetime) -> dict[str, Any]:
    """A time chart with no point at all says why, over the chosen window (not around midnight of
    1 January 2000, Plotly's empty date axis). The browser drops the note once points arrive."""
    if any(len(t.get("x") or []) for t in fig["data"]):
        return fig
    layout = fig["layout"]
    layout["annotations"] = [*layout.get("annotations", []), {
        "name": "no-data", "text": NO_DATA, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5,
        "showarrow": False, "font": {"size": 13, "color": "#6b7385"}}]
    start = now - dt.timedelta(minutes=minutes)
    layout["xaxis"] = {**layout.get("xaxis", {}), "autorange": False,
                       "range": [start.strftime("%Y-%m-%d %H:%M:%S"), now.strftime("%Y-%m-%d %H:%M:%S")]}
    return fig


def fleet_figures(*, minutes: int, snapshot: dict[str, Any]) -> dict[str, Any]:
    tiers = snapshot["tiers"]
    now = timezone.now()
    return {
        "queue": _say_when_empty(queue_figure(telemetry.queue_depth_series(tier=None, minutes=minutes), tiers),
                                 minutes=minutes, now=now),
        "util": _say_when_empty(utilisation_figure(telemetry.utilisation_series(minutes=minutes), tiers),
                                minutes=minutes, now=now),
        "latency": _say_when_empty(
            latency_figure(telemetry.fleet_stage_latency_series(minutes=minutes)["stages"]), minutes=minutes, now=now),
        "breakdown": breakdown_figure(tiers),
    }


def tier_figures(*, tier: Any, minutes: int, snapshot: dict[str, Any]) -> dict[str, Any]:
    tiers = [t for t in snapshot["tiers"] if t["id"] == tier.pk]
    now = timezone.now()
    figures = {
        "queue": _say_when_empty(queue_figure(telemetry.queue_depth_series(tier=tier, minutes=minutes), tiers),
                                 minutes=minutes, now=now),
        "latency": _say_when_empty(
            latency_figure(telemetry.stage_latency_series(tier=tier, minutes=minutes)["tiers"][0]["stages"]),
            minutes=minutes, now=now),
        "breakdown": breakdown_figure(tiers),
    }
    if any(t.get("total") for t in tiers):  # a tier on endpoints only (tier 3) has no utilisation of ours
        figures["util"] = _say_when_empty(utilisation_figure(
            telemetry.utilisation_series(minutes=minutes, tier_id=tier.pk), tiers), minutes=minutes, now=now)
    return figures


def node_figures(*, node: Any, minutes: int) -> dict[str, Any]:
    history = telemetry.node_history(node=node, minutes=minutes)
    now = timezone.now()
    figures = {"node": _say_when_empty(node_figure(history), minutes=minutes, now=now)}
    if history["modules"]:
        figures["modules"] = _say_when_empty(modules_figure(history), minutes=minutes, now=now)
    return figures
