/* rollout.js: the rollout page follows the rollout over the websocket (each rollout event re-reads
 * its state, progress, nodes and the cohort chart from the API; every 3 s instead while the socket is
 * down) and sends the operator's controls, each with a reason (the action dialog). Everything is
 * escaped before it reaches the page. */
import { Live } from "../live.js";
import { ask, errorText, esc, send } from "../actions.js";
import { plot } from "../charts.js";

const cfg = JSON.parse(document.getElementById("rollout-config").textContent);
const $ = (id) => document.getElementById(id);

const stepColour = (s) => cfg.step_colours[s] || "#5f6779";
async function refresh() {
  let r, nodes;
  try {
    r = await Live.fetchJSON(cfg.api);
    nodes = await Live.fetchJSON(cfg.api + "nodes/?limit=1000");
  } catch (e) { return; }
  const state = $("rollout-state");
  state.textContent = r.state.replace("_", " ");
  state.style.background = cfg.state_colours[r.state] || "#5f6779";
  $("rollout-waiting").textContent = r.waiting_for || "—";
  $("rollout-message").textContent = r.message || "";
  $("rollout-message-row").hidden = !r.message;
  const p = r.progress;
  $("progress-all").max = p.nodes; $("progress-all").value = p.settled;
  $("progress-all-text").textContent = p.done + "/" + p.nodes + " done, " + p.settled + " settled";
  for (const w of p.waves) {
    const row = document.querySelector('[data-wave="' + w.index + '"]');
    if (!row) continue;
    const bar = row.querySelector("progress");
    bar.max = w.nodes; bar.value = w.settled;
    row.querySelector(".wave-text").textContent = w.done + "/" + w.nodes + " done";
  }
  const rows = Array.isArray(nodes) ? nodes : nodes.results;
  $("rollout-nodes").querySelector("tbody").innerHTML = rows.map((n) =>
    '<tr data-node="' + n.node + '"><td>' + (n.wave === null ? "—" : n.wave === 0 ? "canary" : n.wave) +
    '</td><td><a href="/nodes/' + n.node + '/">' + esc(n.hostname) + '</a> <span class="small muted">' +
    esc(n.node_state) + '</span></td><td><span class="badge" style="background:' + stepColour(n.step) + '">' +
    esc(n.step.replace("_", " ")) + "</span>" + (n.rollback_phase ? ' <span class="small">(' +
    esc(n.rollback_phase) + ")</span>" : "") + '</td><td class="small">' + esc(n.waiting_for || n.reason) +
    '</td><td class="mono small">' + esc(n.lkg_driver) + " + " + esc(n.lkg_framework) + '</td><td class="small">' +
    (n.vector_run ? "#" + n.vector_run : "") + '</td><td class="nowrap small">' +
    (n.step_changed_at ? '<time datetime="' + esc(n.step_changed_at) + '">' +
      esc(n.step_changed_at.slice(0, 19).replace("T", " ")) + " UTC</time>" : "") + "</td></tr>").join("");
  $("rollout-gates").textContent = r.gates.length ? r.gates.map((g) => JSON.stringify(g)).join("\n")
    : "No gate evaluated yet.";
}
/* ---- the cohort chart: per-stage p95 per minute, upgraded (solid) against control (dotted) ---- */
const STAGE_COLOURS = ["#5b6ee1", "#2e9d5b", "#e07b00", "#c0392b", "#8e44ad", "#3a8fb7"];
let chartAt = 0;
async function refreshChart() {
  chartAt = Date.now();
  let c;
  try { c = await Live.fetchJSON(cfg.api + "cohorts/"); } catch (e) { return; }
  const traces = [];
  const stages = [];
  for (const name of ["upgraded", "control"]) {
    for (const p of c.cohorts[name].points) {
      for (const st of Object.keys(p.p95_ms)) if (!stages.includes(st)) stages.push(st);
    }
  }
  stages.forEach((st, i) => {
    for (const name of ["upgraded", "control"]) {
      const pts = c.cohorts[name].points.filter((p) => p.p95_ms[st] !== undefined);
      if (!pts.length) continue;
      traces.push({
        x: pts.map((p) => p.minute), y: pts.map((p) => p.p95_ms[st]), type: "scatter", mode: "lines+markers",
        name: name + " (" + c.cohorts[name].nodes + ") · " + st, legendgroup: st,
        line: { color: STAGE_COLOURS[i % STAGE_COLOURS.length], dash: name === "upgraded" ? "solid" : "dot",
                width: name === "upgraded" ? 2.5 : 1.5 },
        marker: { size: 4 },
      });
    }
  });
  const layout = {
    margin: { l: 50, r: 10, t: 10, b: 40 }, height: 300, yaxis: { title: "p95 ms", rangemode: "tozero" },
    legend: { orientation: "h", y: -0.25 },
    annotations: traces.length ? [] : [{ text: "No per-node stage figures for either cohort yet", showarrow: false,
      xref: "paper", yref: "paper", x: 0.5, y: 0.5 }],
    xaxis: { visible: traces.length > 0 },
  };
  plot("cohort-chart", { data: traces, layout: layout });  // charts.js: themed like every chart
  const g = c.gate;
  $("cohort-gate").textContent = g ? "Cohort gate, wave " + g.wave + ": " + (g.ok ? "passed" : "FAILED") +
    (g.acknowledged ? " (resumed past by " + g.acknowledged + ")" : "") + " — " + g.detail
    : "Cohort gate: not evaluated yet (after the first wave's bake).";
  $("cohort-gate").className = "small" + (g && !g.ok ? " bad" : "");
}

/* Live: rollout events on the fleet socket re-read the page (coalesced); while the socket is
 * down, poll every 3 s. What a node waits for counts down without events: re-read every 15 s. */
let pending = null;
let lastRefresh = 0;
function soon(chart) {
  if (chart) chartAt = 0;
  if (pending) return;
  pending = setTimeout(() => { pending = null; tick(); }, 250);
}
async function tick() {
  lastRefresh = Date.now();
  await refresh();
  if (Date.now() - chartAt > 15000) await refreshChart();
}
const mine = (d) => d && (d.rollout === cfg.id || d.id === cfg.id);
let events = 0;
Live.connect(cfg.ws, {
  onMessage: (msg) => {
    if (typeof msg.type === "string" && msg.type.startsWith("rollout.") && mine(msg.data)) {
      events += 1;
      soon(msg.type !== "rollout.node");
    }
  },
  resync: () => { chartAt = 0; return tick(); },
});
setInterval(() => {
  const live = Live.state.status === "live";
  if (!live || Date.now() - lastRefresh > 15000) tick();
}, 3000);
refreshChart();
window.RolloutPage = { refresh: tick, refreshChart: refreshChart, events: () => events };
const controls = $("rollout-controls");
if (controls) {
  controls.addEventListener("click", (ev) => {
    const what = ev.target.getAttribute("data-control");
    if (!what) return;
    ask({
      title: ev.target.textContent.trim() + " the rollout",
      text: "Reason for " + what + " (goes to the audit log)",
      async submit(reason) {
        const res = await send(cfg.api + what + "/", { reason: reason });
        $("control-error").hidden = res.ok;
        if (!res.ok) $("control-error").textContent = errorText(res);
        soon(true);
        return null;
      },
    });
  });
}
