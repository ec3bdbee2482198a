/* rollout-new.js: the new-rollout page shows the preview (waves, capacity, gates now) and starts the
 * rollout with the reason typed in its form. Everything is escaped before it reaches the page. */
import { Live } from "../live.js";
import { errorText, esc } from "../actions.js";

const cfg = JSON.parse(document.getElementById("rollout-config").textContent);
const $ = (id) => document.getElementById(id);

const form = $("rollout-form");
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
  };
};
function render(p) {
  const waves = p.waves.map((w) =>
    "<h3>" + (w.canary ? "Canary" : "Wave " + w.index) + " — " + w.nodes.length + " node(s)</h3><ul class=\"small\">" +
    w.nodes.map((n) => "<li>" + esc(n.hostname) + (n.serving ? "" : " (standby)") + ": " +
      esc((n.from[0] || {}).driver) + " + " + esc((n.from[0] || {}).framework) + " → " + esc(n.to.driver) +
      " + " + esc(n.to.framework) + "</li>").join("") + "</ul><table class=\"list small\"><tr><th>Tier</th>" +
    "<th>Active before</th><th>Out</th><th>Active during</th><th>Floor</th><th>Need</th><th></th></tr>" +
    w.capacity.map((c) => "<tr><td>" + esc(c.tier_name) + "</td><td>" + c.active_before + "</td><td>" + c.out +
      "</td><td>" + c.active_during + "</td><td>" + c.floor + "</td><td>" + c.need + "</td><td>" +
      (c.ok ? "ok" : '<span class="bad">below floor</span>') + "</td></tr>").join("") + "</table>").join("");
  const skipped = p.skipped.length ? "<h3>Skipped</h3><ul class=\"small\">" + p.skipped.map((s) =>
    "<li>" + esc(s.hostname) + ": " + esc(s.reason) + "</li>").join("") + "</ul>" : "";
  const gates = "<h3>Gates now (dry run)</h3><ul class=\"small\">" + Object.entries(p.gates).map(([k, g]) =>
    "<li>" + esc(k) + ": " + (g.ok ? "ok" : '<span class="bad">not ok</span>') + " — " +
    esc(g.detail || g.state || "") + "</li>").join("") + "</ul>";
  $("preview-body").innerHTML = waves + skipped + gates;
  $("preview").hidden = false;
}
$("preview-button").addEventListener("click", async () => {
  const res = await Live.send(cfg.preview, body());
  $("preview-error").hidden = res.ok;
  if (!res.ok) { $("preview-error").textContent = errorText(res); $("preview").hidden = true; return; }
  render(res.data);
});
const start = $("start-button");
if (start) {
  start.addEventListener("click", async () => {
    const reason = $("rollout-reason").value.trim();
    if (!reason) { $("preview-error").hidden = false; $("preview-error").textContent = "Say why (reason)."; return; }
    if (!window.confirm("Start the rollout now?")) return;
    const res = await Live.send(cfg.create, Object.assign(body(), { reason: reason }));
    if (res.ok) { window.location = "/rollouts/" + res.data.id + "/"; return; }
    $("preview-error").hidden = false;
    $("preview-error").textContent = errorText(res);
  });
}
