/* tiers.js: the tier boxes and tier charts the fleet page and a tier page share: live figures per
 * tier, the queue chart's live tail, the stage breakdown, and the scale and autoscaler actions. */
import { Live } from "../live.js";
import { dialogError, toast } from "../actions.js";
import { redraw } from "../charts.js";
import { gd, hooks, kinds, numText, pctText, view } from "./live-page.js";

let pct = "p50_ms";

// "on (dry run)": the policy records decisions but scales nothing.
function autoscalerLabel(a) { return a.enabled ? (a.dry_run ? "on (dry run)" : "on") : "off"; }

function updateTiers(snap) {
  snap.tiers.forEach((t) => {
    document.querySelectorAll('[data-live-tier="' + t.id + '"]').forEach((box) => {
      box.querySelectorAll("[data-live-text]").forEach((n) => {
        const key = n.dataset.liveText;
        n.textContent = key.endsWith("_util") ? pctText(t[key]) : numText(t[key]);
      });
      box.querySelectorAll("[data-live]").forEach((n) => {
        n.style.width = Math.round(100 * Math.min(1, t[n.dataset.live] || 0)) + "%";
      });
      const auto = box.querySelector("[data-live-autoscaler]");
      if (auto && t.autoscaler) {
        auto.dataset.enabled = String(t.autoscaler.enabled);
        auto.textContent = "Autoscaler: " + autoscalerLabel(t.autoscaler);
      }
      const autoText = box.querySelector("[data-live-autoscaler-text]");
      if (autoText && t.autoscaler) autoText.textContent = autoscalerLabel(t.autoscaler);
      const size = box.querySelector('[data-action="scale"]');
      if (size) size.dataset.desired = t.active;
    });
  });
}

// An empty time chart comes with a "no data yet" note over the chosen window (charts.py);
// once points arrive (the queue chart's live tail), the note goes and the axis fits the data.
function dropNoData(layout, data) {
  const notes = layout.annotations || [];
  if (!notes.some((a) => a.name === "no-data") || !data.some((t) => (t.x || []).length)) return;
  layout.annotations = notes.filter((a) => a.name !== "no-data");
  const xaxis = Object.assign({}, layout.xaxis, { autorange: true });
  delete xaxis.range;
  layout.xaxis = xaxis;
}

function appendLive(snap) {
  const div = gd("queue");
  if (!div || !div.data) return;
  const cutoff = Date.parse(snap.time) - view.minutes * 60000;
  let changed = false;
  div.data.forEach((trace) => {
    const meta = trace.meta || {};
    if (meta.role !== "live") return;
    const t = snap.tiers.find((x) => x.id === meta.tier_id);
    if (!t || t[meta.field] === null || t[meta.field] === undefined) return;
    const xs = (trace.x || []).slice(), ys = (trace.y || []).slice();
    xs.push(snap.time); ys.push(t[meta.field]);
    while (xs.length && Date.parse(xs[0]) < cutoff) { xs.shift(); ys.shift(); }
    trace.x = xs; trace.y = ys; changed = true;
  });
  if (changed) { dropNoData(div.layout, div.data); redraw(div); }
}

function updateBreakdown(snap) {
  const div = gd("breakdown");
  if (!div || !div.data) return;
  const tiers = {};
  snap.tiers.forEach((t) => { tiers[t.id] = t; });
  div.data.forEach((trace) => {
    const meta = trace.meta || {};
    if (!meta.stage) return;
    trace.x = meta.tier_ids.map((id) => {
      const s = ((tiers[id] || {}).stages || []).find((x) => x.stage === meta.stage);
      return s ? s[pct] : 0;
    });
  });
  redraw(div);
}

// The autoscaler policy's fields in the dialog: [input id, API field, parse]
const POLICY_FIELDS = [
  ["policy-enabled", "enabled"], ["policy-dry-run", "dry_run"], ["policy-target", "target_queue_per_node", parseFloat],
  ["policy-tolerance", "tolerance", parseFloat], ["policy-cooldown", "cooldown_s", (v) => parseInt(v, 10)],
  ["policy-min", "min_nodes", (v) => (v === "" ? null : parseInt(v, 10))],
  ["policy-max", "max_nodes", (v) => (v === "" ? null : parseInt(v, 10))],
];
const $ = (id) => document.getElementById(id);

export function startTiers() {
  hooks.snapshot.push(updateTiers, appendLive, updateBreakdown);
  // keep the chosen percentile (p50/p95/p99 buttons) across refreshes
  hooks.figure.latency = {
    before(div, fig) {
      if (!div.data || div.data.length !== fig.data.length) return;
      fig.data.forEach((t, i) => { t.visible = div.data[i].visible; });
      if (div.layout.updatemenus) fig.layout.updatemenus = div.layout.updatemenus;
    },
  };
  const pctSelect = $("breakdown-pct");
  if (pctSelect) pctSelect.addEventListener("change", () => { pct = pctSelect.value; if (window.__snapshot) updateBreakdown(window.__snapshot); });
  kinds.scale = {
    open(btn) {
      const input = $("action-desired");
      input.value = btn.dataset.desired; input.min = btn.dataset.min; input.max = btn.dataset.max;
      return { rows: ["desired"],
               text: "Scale-up activates standby nodes; scale-down drains the least busy nodes first (min " + btn.dataset.min + ", max " + btn.dataset.max + ")." };
    },
    body(btn, body) { body.desired = parseInt($("action-desired").value, 10); return body; },
  };
  kinds.autoscaler = {
    method: "PATCH",
    open(btn) {
      POLICY_FIELDS.forEach(([id]) => { const el = $(id); if (el.type === "checkbox") el.checked = false; else el.value = ""; });
      Live.fetchJSON(btn.dataset.url).then((p) => {
        POLICY_FIELDS.forEach(([id, key]) => {
          const el = $(id);
          if (el.type === "checkbox") el.checked = !!p[key]; else el.value = p[key] === null || p[key] === undefined ? "" : p[key];
        });
      }).catch((e) => dialogError(String(e)));
      return { rows: ["policy"], text: "The tier's autoscaler policy: the queue per node it aims at, and whether it scales or only records decisions." };
    },
    body(btn, body) {
      const out = { reason: body.reason };
      POLICY_FIELDS.forEach(([id, key, parse]) => { const el = $(id); out[key] = el.type === "checkbox" ? el.checked : parse(el.value); });
      const bad = POLICY_FIELDS.find(([, key]) => typeof out[key] === "number" && isNaN(out[key]));
      return bad ? "Fill in " + bad[1].replace(/_/g, " ") + "." : out;
    },
    done(btn, d) {
      btn.dataset.enabled = String(d.enabled);
      btn.textContent = "Autoscaler: " + autoscalerLabel(d);
      toast("autoscaler " + autoscalerLabel(d) + ", target " + d.target_queue_per_node + " queued per node");
    },
  };
}
