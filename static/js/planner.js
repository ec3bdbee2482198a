/* Capacity planner page: forms post to the planner API as you type (debounced),
 results and filled-in formulas come back from the server; the chart is a
 Plotly figure built server-side and swapped in through charts.js (themed). */
import { csrfToken } from "./live.js";
import { esc } from "./actions.js";
import { plot } from "./charts.js";
import { num } from "./format.js";

function debounce(fn, ms) {
  let t = null;
  return function () {
    clearTimeout(t);
    t = setTimeout(fn, ms);
  };
}

// Figures as every page prints them (format.js), the planner's very large and very small ones in
// scientific notation (2.5e8 instructions a second); text stays text.
function fmt(v) {
  if (typeof v !== "number") return v === null || v === undefined ? num(v) : String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e7 || a < 1e-3)) return v.toExponential(4).replace(/\.?0+e/, "e").replace("e+", "e");
  return num(v);
}

async function api(url, method, body) {
  const opts = {
    method: method,
    credentials: "same-origin",
    headers: { "Accept": "application/json", "X-CSRFToken": csrfToken() },
  };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(url, opts);
  let data = null;
  try { data = await resp.json(); } catch (e) { data = { detail: "HTTP " + resp.status }; }
  return { ok: resp.ok, status: resp.status, data: data };
}

function formValues(form) {
  const out = {};
  form.querySelectorAll("input[name]").forEach(function (input) {
    const raw = input.value.trim();
    if (raw === "") return; // missing: the server applies the default or says it is required
    const n = Number(raw);
    out[input.name] = Number.isFinite(n) ? n : raw;
  });
  return out;
}

function showErrors(form, status, result) {
  form.querySelectorAll("[data-error-for]").forEach(function (el) { el.textContent = ""; });
  form.querySelectorAll("input").forEach(function (el) { el.classList.remove("invalid"); });
  if (!status) return;
  if (result.ok) {
    status.textContent = "";
    status.classList.remove("bad");
    return;
  }
  const errors = (result.data && result.data.errors) || {};
  Object.keys(errors).forEach(function (name) {
    const slot = form.querySelector('[data-error-for="' + name + '"]');
    const input = form.querySelector('input[name="' + name + '"]');
    if (slot) slot.textContent = errors[name].join(" ");
    if (input) input.classList.add("invalid");
  });
  status.textContent = (result.data && result.data.detail) || ("HTTP " + result.status);
  status.classList.add("bad");
}

function showResults(container, data) {
  container.querySelectorAll("[data-out]").forEach(function (el) {
    const key = el.dataset.out;
    let v = data[key];
    if (key === "cpu_headroom" && typeof v === "number") {
      el.textContent = fmt(v) + " (" + (v * 100).toFixed(1) + "%)";
      el.classList.toggle("neg", v < 0);
      return;
    }
    if (key === "reference_configuration" && v) {
      el.textContent = v.agents + " agents";
      return;
    }
    if (key === "plan_saving" && typeof v === "number") el.classList.toggle("neg", v < 0);
    el.textContent = fmt(v);
  });
  container.querySelectorAll("[data-explain]").forEach(function (el) {
    el.textContent = (data.explanations || {})[el.dataset.explain] || "";
  });
}

// --- array sizing, chart and cost --------------------------------------
const arrayForm = document.getElementById("array-form");
const costForm = document.getElementById("cost-form");
const agentForm = document.getElementById("agent-form");
const chart = document.getElementById("planner-chart");
let lastPlan = null;
let arraySeq = 0;

const PLOT_CONFIG = { displaylogo: false, responsive: true };

async function updateCost() {
  const body = formValues(costForm);
  if (lastPlan) {
    body.cpu_nodes = lastPlan.nodes_needed;
    body.modules = lastPlan.modules_needed;
    body.concurrent_users = lastPlan.inputs.concurrent_users;
  }
  const result = await api(costForm.dataset.api, "POST", body);
  showErrors(costForm, document.getElementById("cost-status"), result);
  if (result.ok) showResults(document.getElementById("cost-results"), result.data);
}

async function updateArray() {
  const seq = ++arraySeq;
  const body = formValues(arrayForm);
  const status = document.getElementById("array-status");
  status.textContent = "computing…";
  status.classList.remove("bad");
  const result = await api(arrayForm.dataset.api, "POST", body);
  if (seq !== arraySeq) return; // a newer keystroke won
  showErrors(arrayForm, status, result);
  document.getElementById("array-results").classList.toggle("stale", !result.ok);
  if (!result.ok) return;
  lastPlan = result.data;
  showResults(document.getElementById("array-results"), result.data);
  document.body.dataset.arrayUpdated = String(seq);
  updateCost();
  const fig = await api(chart.dataset.api, "POST", body);
  if (seq === arraySeq && fig.ok && window.Plotly) {
    plot(chart, fig.data.figure, PLOT_CONFIG);
    chart.dataset.users = String(body.concurrent_users);
  }
}

async function updateAgents() {
  const result = await api(agentForm.dataset.api, "POST", formValues(agentForm));
  showErrors(agentForm, document.getElementById("agent-status"), result);
  if (!result.ok) return;
  const data = result.data;
  showResults(document.getElementById("agent-results"), data);
  const ref = data.reference_configuration;
  const cell = agentForm.parentElement.querySelector('[data-explain="reference_configuration"]');
  if (cell && ref) cell.textContent = ref.explanation;
}

// --- what-if -------------------------------------------------------------
const whatIfCard = document.getElementById("what-if-card");

function plural(n, word) { return n + " " + word + (Math.abs(n) === 1 ? "" : "s"); }

function deltaText(n, word) {
  if (n === null || n === undefined) return "";
  const cls = n > 0 ? "pos" : n < 0 ? "neg" : "";
  return '<span class="' + cls + '">' + (n > 0 ? "+" : "") + plural(n, word) + "</span>";
}

async function whatIf(useMine) {
  const status = document.getElementById("what-if-status");
  const tbody = document.querySelector("#what-if-results tbody");
  status.textContent = "comparing…";
  status.classList.remove("bad");
  let result;
  if (useMine) {
    const v = formValues(arrayForm);
    const body = {};
    ["concurrent_users", "request_interval_s", "input_tokens", "output_tokens", "gflops_per_token",
     "instructions_per_request", "usable_fraction"].forEach(function (k) { if (k in v) body[k] = v[k]; });
    result = await api(whatIfCard.dataset.api, "POST", body);
  } else {
    result = await api(whatIfCard.dataset.api, "GET");
  }
  if (!result.ok) {
    status.textContent = (result.data && result.data.detail) || ("HTTP " + result.status);
    status.classList.add("bad");
    tbody.innerHTML = "";
    document.getElementById("what-if-demand").textContent = "";
    return;
  }
  const d = result.data;
  status.textContent = "";
  // The server's demand sentence names each figure once, with where it came from.
  document.getElementById("what-if-demand").textContent =
    "Demand (" + d.demand.source + "): " + d.demand.explanation + ". Plan: " + plural(d.plan.modules_needed, "module") +
    " on " + plural(d.plan.nodes_needed, "node") + ", " + fmt(d.plan.compute_tflops) + " TFLOPs/s.";
  tbody.innerHTML = d.tiers.map(function (t) {
    const needed = t.nodes_needed === null ? "—" :
      plural(t.nodes_needed, "node") + (t.needed.modules !== undefined ? ", " + plural(t.needed.modules, "module") : "");
    const change = (t.modules_delta !== null ? deltaText(t.modules_delta, "module") + "<br>" : "") +
      (t.nodes_needed === null ? "" : deltaText(t.nodes_delta, "node"));
    const why = Object.values(t.explanations || {}).map(esc).join("<br>");
    const a = t.autoscaler;
    const auto = a ? '<br><span class="muted" data-autoscaler>autoscaler: ' + esc(plural(a.desired, "node")) +
      (a.raw !== a.desired ? " (its formula " + a.raw + ")" : "") + "</span>" : "";
    // The server's two sentences on why the plan and the autoscaler differ, under the tier's figures.
    const compare = a ? '<tr class="compare" data-compare="' + esc(t.tier) + '"><td></td><td colspan="4">' +
      esc(a.comparison) + "</td></tr>" : "";
    return '<tr data-tier="' + esc(t.tier) + '"><td>' + esc(t.name) + "</td><td>" + t.active_nodes + " / " +
      t.standby_nodes + "</td><td>" + esc(needed) + auto + "</td><td>" + change + '<br><span class="muted">' +
      esc(t.action) + '</span></td><td class="formula">' + why + "</td></tr>" + compare;
  }).join("");
}

// --- wiring ----------------------------------------------------------------
plot(chart, JSON.parse(document.getElementById("planner-initial-figure").textContent), PLOT_CONFIG);

arrayForm.addEventListener("input", debounce(updateArray, 250));
costForm.addEventListener("input", debounce(updateCost, 250));
agentForm.addEventListener("input", debounce(updateAgents, 250));
[arrayForm, costForm, agentForm].forEach(function (f) {
  f.addEventListener("submit", function (e) { e.preventDefault(); });
});
document.getElementById("what-if-observed").addEventListener("click", function () { whatIf(false); });
document.getElementById("what-if-mine").addEventListener("click", function () { whatIf(true); });

updateArray();
updateAgents();
whatIf(false);
