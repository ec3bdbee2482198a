/* nodes.js: the node list: each row's newest CPU, module utilisation and requests in flight follow
 * the snapshot (as its state does); operators cordon or drain a selection, with one confirmation
 * naming every node and one API call for all of them (POST /api/v1/nodes/actions/); the rows are
 * re-read as the server renders them. The order is the server's (?sort=): rows do not move under
 * the pointer while an operator picks one; sorting again re-reads the page. */
import { Live } from "../live.js";
import { errorText, toast } from "../actions.js";
import { deadlineFields, hooks, kinds, numText, pctText, reread, start, warn } from "./live-page.js";

function updateLoad(snap) {
  const f = snap.node_fields;
  const at = { cpu: f.indexOf("cpu"), module_util: f.indexOf("module_util"), in_flight: f.indexOf("in_flight") };
  snap.nodes.forEach((r) => {
    const row = document.querySelector('#node-table [data-node-row="' + r[0] + '"]');
    if (!row) return;
    row.querySelector('[data-cell="cpu"]').textContent = pctText(r[at.cpu]);
    row.querySelector('[data-cell="module_util"]').textContent = pctText(r[at.module_util]);
    row.querySelector('[data-cell="in_flight"]').textContent = numText(r[at.in_flight]);
  });
}
hooks.snapshot.push(updateLoad);

function picked() { return [...document.querySelectorAll("#node-table input.pick:checked")]; }
function updatePicks() {
  const n = picked().length;
  const count = document.getElementById("bulk-count");
  if (count) count.textContent = n + " selected";
  document.querySelectorAll('#bulk-bar button[data-action="bulk"]').forEach((b) => { b.disabled = n === 0; });
}
document.addEventListener("change", (ev) => {
  if (ev.target.id === "pick-all") document.querySelectorAll("#node-table input.pick").forEach((c) => { c.checked = ev.target.checked; });
  if (ev.target.id === "pick-all" || ev.target.classList.contains("pick")) updatePicks();
});

kinds.bulk = {
  open(btn) {
    btn.__nodes = picked().map((c) => ({ id: c.value, hostname: c.dataset.hostname }));
    const k = btn.__nodes.length;
    const drain = btn.dataset.bulk === "drain";
    return { title: btn.dataset.title + " " + k + " node" + (k === 1 ? "" : "s"), rows: drain ? ["deadline", "then"] : [],
             text: "Nodes: " + btn.__nodes.map((n) => n.hostname).join(", ") + ". " + (btn.dataset.text || "") };
  },
  body(btn, body) {
    if (btn.dataset.bulk !== "drain") return body;
    const d = deadlineFields();
    return typeof d === "string" ? d : Object.assign(body, d, { then: document.getElementById("action-then").value });
  },
  async submit(btn, body) {
    // One request for the whole selection: applied to every node, or refused whole (a node outside
    // the operator's scope, a capacity floor) with the reason, and nothing changed.
    const nodes = btn.__nodes || [];
    const res = await Live.send("/api/v1/nodes/actions/", Object.assign({}, body, {
      action: btn.dataset.bulk, nodes: nodes.map((n) => Number(n.id)) }), "POST");
    const plural = nodes.length + " node" + (nodes.length === 1 ? "" : "s");
    if (!res.ok) {
      toast(btn.dataset.bulk + " refused for " + plural + ": nothing changed", true);
      return "Refused, nothing changed: " + errorText(res);
    }
    warn(reread("node-rows").then(updatePicks));
    toast(btn.dataset.bulk + ": " + plural + " done", false);
    return null;
  },
};
start();
