/* racks.js: the rack heat map: each node's cell recoloured from the snapshot for the chosen metric
 * (#rack-metrics, charts.py RACK_METRICS); a click opens the node. */
import { redraw } from "../charts.js";
import { cfg, gd, hooks, json, start } from "./live-page.js";

const rackSpecs = json("rack-metrics");
let rackMetric = cfg.metric || "cpu";

function rackValue(row, fields, metric) {
  const spec = rackSpecs[metric];
  const v = row[fields.indexOf(spec.field)];
  if (metric === "state") return spec.states.indexOf(v);
  const age = row[fields.indexOf("age_s")];
  return age === null || age > 120 ? null : v;
}

function recolourRacks(trace, snap) {
  if (!trace || !snap || !rackSpecs) return;
  const f = snap.node_fields;
  const where = {};
  trace.customdata.forEach((row, y) => row.forEach((id, x) => { if (id !== null) where[id] = [y, x]; }));
  const z = trace.z.map((row) => row.slice());
  const text = trace.text.map((row) => row.slice());
  snap.nodes.forEach((r) => {
    const cell = where[r[f.indexOf("id")]];
    if (!cell) return;
    z[cell[0]][cell[1]] = rackValue(r, f, rackMetric);
    text[cell[0]][cell[1]] = r[f.indexOf("hostname")] + " · " + r[f.indexOf("state")];
  });
  trace.z = z; trace.text = text;
}

function applyRackSpec(fig) {
  const spec = rackSpecs[rackMetric];
  const tr = fig.data[0];
  tr.colorscale = spec.colorscale; tr.zmin = spec.zmin; tr.zmax = spec.zmax;
  tr.colorbar = Object.assign({}, tr.colorbar || {}, { title: { text: spec.label, side: "right" } });
  if (spec.format === "state") {
    tr.colorbar.tickvals = spec.states.map((_, i) => i);
    tr.colorbar.ticktext = spec.states;
    tr.hovertemplate = "%{text}<extra></extra>";
  } else {
    tr.colorbar.tickvals = null; tr.colorbar.ticktext = null;
    tr.colorbar.tickformat = spec.format === "pct" ? ".0%" : "";
    tr.hovertemplate = "%{text}<br>" + spec.label + ": %{z" + (spec.format === "pct" ? ":.0%" : ":.1f") + "}<extra></extra>";
  }
}

function updateRacks(snap) {
  const div = gd("racks");
  if (!div || !div.data) return;
  recolourRacks(div.data[0], snap);
  redraw(div);
}

hooks.snapshot.push(updateRacks);
hooks.figure.racks = {
  before(div, fig) { recolourRacks(fig.data[0], window.__snapshot); applyRackSpec(fig); },
  after(div) {
    if (div.__clicks) return;
    div.__clicks = true;
    div.on("plotly_click", (ev) => {
      const id = ev.points && ev.points[0] && ev.points[0].customdata;
      if (id) location.href = "/nodes/" + id + "/";
    });
  },
};
const metricSelect = document.getElementById("rack-metric");
if (metricSelect) metricSelect.addEventListener("change", () => {
  rackMetric = metricSelect.value;
  const url = new URL(location.href); url.searchParams.set("metric", rackMetric); history.replaceState(null, "", url);
  applyRackSpec({ data: gd("racks").data });
  updateRacks(window.__snapshot);
});
start();
