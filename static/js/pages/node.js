/* node.js: the node page: its state, hold, newest sample, module telemetry and audit trail live;
 * its actions (cordon, drain, uncordon, maintenance; quarantine and release of a module) enabled
 * as the server's allowed_actions say. */
import { Live } from "../live.js";
import { badge, cfg, deadlineFields, hooks, kinds, numText, pctText, reread, setNodeState, start, warn } from "./live-page.js";

const moduleIds = new Set([...document.querySelectorAll("[data-module]")].map((r) => r.dataset.module));

// One refresh at a time; one asked for while another is in flight (an event that came after
// its fetch left) runs again once it ends, so the page never settles on an older answer.
let nodeBusy = false, nodeDirty = false;
async function refreshNode() {
  if (nodeBusy) { nodeDirty = true; return; }
  nodeBusy = true;
  try {
    do {
      nodeDirty = false;
      renderNode(await Live.fetchJSON(cfg.live_url));
    } while (nodeDirty);
  } finally { nodeBusy = false; }
}

// The button of the action the module's state allows (the server's m.allowed_actions), as
// templates/dashboard/_node_modules_live.html renders it.
function moduleAction(m) {
  const b = document.createElement("button");
  b.type = "button";
  if (m.allowed_actions.includes("release")) {
    b.className = "act small-btn"; b.dataset.action = "release"; b.textContent = "Release";
    b.dataset.title = "Release module " + m.serial; b.dataset.text = "Put the module back to work.";
  } else if (m.allowed_actions.includes("quarantine")) {
    b.className = "act warn small-btn"; b.dataset.action = "quarantine"; b.textContent = "Quarantine";
    b.dataset.title = "Quarantine module " + m.serial; b.dataset.text = "No new work on this module; the node serves on its others.";
  } else return null;
  b.dataset.url = "/api/v1/modules/" + m.id + "/" + b.dataset.action + "/";
  return b;
}

function renderNode(n) {
  setNodeState(n.id, n.state);
  const since = document.getElementById("node-state-since");
  if (since && n.state_changed_at && Date.parse(n.state_changed_at) !== Date.parse(since.dataset.since || "")) {
    since.dataset.since = n.state_changed_at;
    since.textContent = "· state since " + n.state_changed_at.slice(0, 16).replace("T", " ") + " UTC";
  }
  n.modules.forEach((m) => { moduleIds.add(String(m.id)); });
  // the actions the node's state allows, as the server says (the API still decides each one)
  document.querySelectorAll("#node-actions button.act").forEach((b) => { b.disabled = !n.allowed_actions.includes(b.dataset.action); });
  const hold = document.getElementById("node-hold");
  if (hold) hold.textContent = n.hold ? n.hold.kind + " by " + n.hold.owner + (n.hold.by ? " (" + n.hold.by + ")" : "") +
    " · " + n.hold.state + " · “" + n.hold.reason + "”" : "none";
  const waiting = document.getElementById("drain-waiting");
  if (waiting) waiting.textContent = n.hold ? n.hold.waiting_for : "nothing";
  const latest = document.getElementById("node-latest");
  if (latest && n.latest) latest.textContent = "CPU " + pctText(n.latest.cpu_util) + " · memory " + pctText(n.latest.mem_util) +
    " · " + (n.latest.in_flight ?? "unknown") + " in flight · load " + numText(n.latest.load1) + " · " + numText(n.latest.age_s, "s") + " ago";
  n.modules.forEach((m) => {
    const row = document.querySelector('[data-module="' + m.id + '"]');
    if (!row) return;
    const set = (k, v) => { const c = row.querySelector('[data-cell="' + k + '"]'); if (c) c.textContent = v; };
    row.querySelector('[data-cell="state"]').replaceChildren(badge("module", m.state));
    document.querySelectorAll('[data-module-state="' + m.id + '"]').forEach((c) => {
      if (!c.querySelector(".badge.state-" + m.state)) c.replaceChildren(badge("module", m.state));
    });
    const act = row.querySelector('[data-cell="action"]');
    if (act) {
      const want = moduleAction(m), btn = act.querySelector("button.act");
      if ((btn ? btn.dataset.action : null) !== (want ? want.dataset.action : null)) act.replaceChildren(...(want ? [want] : []));
    }
    const l = m.latest;
    if (!l) return;
    // A null figure is one the agent could not read: shown as "–", never as 0.
    set("util", pctText(l.util)); set("temp_c", numText(l.temp_c, "°C")); set("power_w", numText(l.power_w, "W"));
    set("link", l.link_width === null ? "–" : "×" + l.link_width + " of ×" + (l.link_width_expected ?? "?"));
    set("ecc_corrected", numText(l.ecc_corrected)); set("ecc_uncorrected", numText(l.ecc_uncorrected));
    set("errors", numText(l.errors));
  });
}

function aboutThisNode(d) {
  return (d.target_type === "node" && d.target_id === String(cfg.node_id)) ||
    (d.target_type === "module" && moduleIds.has(String(d.target_id)));
}

let shown = null;  // this node's state in the last snapshot
hooks.snapshot.push((snap) => {
  const mine = snap.nodes.find((r) => r[0] === cfg.node_id);
  if (mine && shown !== mine[5]) { shown = mine[5]; refreshNode(); }
});
hooks.message.push((msg) => {
  const d = msg.data || {};
  if (msg.type === "node.state" && d.id === cfg.node_id) refreshNode();
  if (msg.type === "drain.progress" && d.node === cfg.node_id) refreshNode();
  if (msg.type === "audit.event" && aboutThisNode(d)) warn(reread("node-audit"));
});
// after a reconnect, the audit records pushed while away were missed: read the trail again
hooks.resync.push((again) => Promise.all([refreshNode(), again ? reread("node-audit") : null]));
hooks.action.push(() => refreshNode());
// a drain (and a maintenance that drains first) takes a deadline and what to do at it
kinds.drain = {
  open: () => ({ rows: ["deadline", "then"] }),
  body(btn, body) {
    const d = deadlineFields();
    return typeof d === "string" ? d : Object.assign(body, d, { then: document.getElementById("action-then").value });
  },
};
kinds.maintenance = {
  open: () => ({ rows: ["deadline"] }),
  body(btn, body) { const d = deadlineFields(); return typeof d === "string" ? d : Object.assign(body, d); },
};
window.Dashboard = Object.assign(window.Dashboard || {}, { refreshNode: refreshNode });
start();
// the module table's newest samples every 5 s
setInterval(() => warn(refreshNode()), 5000);
