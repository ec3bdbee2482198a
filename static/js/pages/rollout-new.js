/* rollout-new.js: the new-rollout page shows the preview (a downgrade flagged, the gates now, the waves
 * node by node with each node's modules by serial, each tier's capacity) and starts the rollout with
 * the reason typed in its form. Which gates fail and which an operator may override come from the
 * preview (the server's dry run); Start is enabled only when every gate passes, or when each failing
 * gate's override is ticked and a reason given (the server refuses anything else with a 409).
 * Everything is escaped before it reaches the page. */
import { Live } from "../live.js";
import { errorText, esc } from "../actions.js";

const cfg = JSON.parse(document.getElementById("rollout-config").textContent);
const $ = (id) => document.getElementById(id);

const form = $("rollout-form");
const start = $("start-button");  // operators only
const reason = $("rollout-reason");
let preview = null;  // the last preview, while the form is as it was then

/* "3" is a number of nodes, "10%" a share of each tier's nodes; anything else goes as typed (the API names it). */
const canaryOf = (v) => (/^\d+$/.test(v) ? Number(v) : v);
const body = () => {
  const f = new FormData(form);
  const multi = (name) => Array.from(form.elements[name].selectedOptions).map((o) => Number(o.value));
  return {
    combination: cfg.combination, module_type: cfg.module_type, suite: cfg.suite,
    tiers: multi("tiers"), racks: multi("racks"), canary: canaryOf(String(f.get("canary")).trim()),
    wave_size: Number(f.get("wave_size")), max_unavailable: String(f.get("max_unavailable")),
    bake_s: Number(f.get("bake_s")), on_failure: String(f.get("on_failure")),
    ...(cfg.nodes && cfg.nodes.length ? { nodes: cfg.nodes } : {}),  // only these nodes (?nodes=)
  };
};

const title = (name) => (preview && preview.gates[name] && preview.gates[name].title) || name;
const versions = (v) => esc(v.driver) + " + " + esc(v.framework);

function overrideCell(name, gate) {
  if (gate.ok) return '<td class="small muted">—</td>';
  if (!gate.overridable) return '<td class="small bad">must pass: it cannot be overridden</td>';
  if (!start) return '<td class="small">an operator may start past it, naming it, with a reason</td>';
  return '<td><label class="check small"><input type="checkbox" class="gate-override" value="' + esc(name) +
    '"> Override: start past the ' + esc(gate.title || name).toLowerCase() + " gate</label></td>";
}

function gatesTable(gates) {
  const rows = Object.entries(gates).map(([name, g]) =>
    '<tr data-gate="' + esc(name) + '"><td>' + esc(g.title || name) + "</td><td>" +
    (g.ok ? '<span class="badge badge-ok">passes</span>' : '<span class="badge badge-bad">fails</span>') +
    '</td><td class="small">' + esc(g.detail || g.state || "") + "</td>" + overrideCell(name, g) + "</tr>").join("");
  return '<h3>Gates now (dry run)</h3><div class="table-wrap"><table class="list" id="preview-gates"><thead><tr>' +
    "<th>Gate</th><th>Now</th><th>What it says</th><th>To start anyway</th></tr></thead><tbody>" + rows +
    "</tbody></table></div>";
}

function waveTables(waves) {
  return waves.map((w) =>
    "<h3>" + (w.canary ? "Canary" : "Wave " + w.index) + " — " + w.nodes.length + " node(s)</h3>" +
    '<div class="table-wrap"><table class="list small"><thead><tr><th>Node</th><th>Modules</th><th>Versions now</th>' +
    "<th>After</th></tr></thead><tbody>" +
    w.nodes.map((n) => "<tr><td>" + esc(n.hostname) + (n.serving ? "" : ' <span class="muted">(standby)</span>') +
      '</td><td class="mono">' + n.from.map((m) => esc(m.serial)).join(", ") + '</td><td class="mono">' +
      Array.from(new Set(n.from.map(versions))).join("; ") + '</td><td class="mono">' + versions(n.to) +
      "</td></tr>").join("") + "</tbody></table></div>" +
    '<div class="table-wrap"><table class="list small"><thead><tr><th>Tier</th><th>Active before</th><th>Out</th>' +
    "<th>Active during</th><th>Floor</th><th>Need</th><th></th></tr></thead><tbody>" +
    w.capacity.map((c) => "<tr><td>" + esc(c.tier_name) + "</td><td>" + c.active_before + "</td><td>" + c.out +
      "</td><td>" + c.active_during + "</td><td>" + c.floor + "</td><td>" + c.need + "</td><td>" +
      (c.ok ? "ok" : '<span class="bad">below floor</span>') + "</td></tr>").join("") +
    "</tbody></table></div>").join("");
}

function flags(p) {
  const down = p.gates.downgrade;
  const out = [];
  if (down && !down.ok) {
    out.push('<p class="pill pill-bad" id="downgrade-flag">' + esc(down.detail) + "</p>");
  }
  if (p.pinned) out.push('<p class="small muted">Pinned now: <span class="mono">' + versions(p.pinned) +
    '</span>; the target: <span class="mono">' + versions(p.target) + "</span></p>");
  return out.join("");
}

function render(p) {
  const skipped = p.skipped.length ? "<h3>Skipped</h3><ul class=\"small\">" + p.skipped.map((s) =>
    "<li>" + esc(s.hostname) + ": " + esc(s.reason) + "</li>").join("") + "</ul>" : "";
  $("preview-flags").innerHTML = flags(p);
  $("preview-body").innerHTML = gatesTable(p.gates) + waveTables(p.waves) + skipped;
  $("preview").hidden = false;
  $("start").hidden = false;
  document.querySelectorAll(".gate-override").forEach((box) => box.addEventListener("change", offer));
  offer();
}

/* What Start needs now, in words; Start is enabled when nothing is missing. */
function offer() {
  if (!start || !preview) return;
  const failing = preview.failing || [];
  const hard = failing.filter((name) => !preview.gates[name].overridable);
  const ticked = Array.from(document.querySelectorAll(".gate-override:checked")).map((b) => b.value);
  const unticked = failing.filter((name) => !ticked.includes(name));
  const named = (names) => names.map(title).join(", ");
  $("start-gates").textContent = failing.length
    ? "Failing now: " + named(failing) + ". " + (hard.length ? "" : "Starting past them needs each one's override ticked " +
      "above and a reason; the audit log and the rollout page name them.")
    : "Every gate passes.";
  let why = "";
  if (hard.length) why = "Cannot start: " + named(hard) + " must pass.";
  else if (unticked.length) why = "Tick the override of: " + named(unticked) + ".";
  else if (!reason.value.trim()) why = failing.length ? "Say why you start past the failing gates (reason)." : "Say why (reason).";
  start.disabled = Boolean(why);
  $("start-why").textContent = why;
}

function stale() {
  if (!preview) return;
  preview = null;
  $("preview").hidden = true;
  $("start").hidden = true;
  $("preview-stale").hidden = false;
}
form.addEventListener("input", stale);
form.addEventListener("change", stale);
if (reason) reason.addEventListener("input", offer);

$("preview-button").addEventListener("click", async () => {
  const res = await Live.send(cfg.preview, body());
  $("preview-error").hidden = res.ok;
  $("preview-stale").hidden = true;
  if (!res.ok) {
    $("preview-error").textContent = errorText(res);
    $("preview").hidden = true; $("start").hidden = true;
    return;
  }
  preview = res.data;
  render(res.data);
});

if (start) {
  start.addEventListener("click", async () => {
    if (start.disabled || !preview) return;
    const override = Array.from(document.querySelectorAll(".gate-override:checked")).map((b) => b.value);
    const ask = override.length
      ? "Start the rollout past the failing gates (" + override.join(", ") + ")?" : "Start the rollout now?";
    if (!window.confirm(ask)) return;
    const res = await Live.send(cfg.create, Object.assign(body(), { reason: reason.value.trim(), override: override }));
    if (res.ok) { window.location = "/rollouts/" + res.data.id + "/"; return; }
    $("preview-error").hidden = false;
    $("preview-error").textContent = errorText(res);
  });
}
