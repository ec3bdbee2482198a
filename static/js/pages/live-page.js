/* live-page.js: what the live pages (fleet, racks, tier, node, nodes, versions, operations, audit)
 * share. The page's settings come from #dash-config (apps/common/pages.py page_config); its figures
 * from #dash-figures, drawn by charts.js; the websocket (live.js) brings a snapshot each second
 * and events as they commit. Each page's own module registers what it does with them (hooks)
 * and its actions (kinds), then calls start().
 *
 * Actions: a button.act opens the one reason dialog (actions.js) and posts to its data-url; the
 * page's kinds add dialog rows and body fields. Which actions a node or module allows is the
 * server's (allowed_actions), never decided here. */
import { Live } from "../live.js";
import { ask, errorText, toast } from "../actions.js";
import { draw } from "../charts.js";

export function json(id) { const n = document.getElementById(id); return n ? JSON.parse(n.textContent) : null; }
export const cfg = json("dash-config") || {};
export const view = { minutes: cfg.minutes };
export const hooks = { snapshot: [], message: [], resync: [], action: [], figure: {} };
export const kinds = {};

// Every figure a live page prints goes through format.js (the server's |num filter is the same rule).
export { pct as pctText, num as numText } from "../format.js";

// ---- figures ---------------------------------------------------------------------------------
export function gd(name) { return document.querySelector('[data-figure="' + name + '"]'); }

/* Draw a named figure of the page; a page's hook may adjust it first (keep a choice, recolour). */
export function drawFigure(name, fig) {
  const div = gd(name);
  if (!div || !fig) return;
  const hook = hooks.figure[name];
  if (hook && hook.before) hook.before(div, fig);
  draw(div, fig);
  if (hook && hook.after) hook.after(div);
}

export async function refreshFigures() {
  if (!cfg.figures_url) return;
  const figs = await Live.fetchJSON(cfg.figures_url + "?minutes=" + view.minutes);
  Object.keys(figs).forEach((k) => drawFigure(k, figs[k]));
}

// ---- states ------------------------------------------------------------------------------------
/* A state's badge, copied from the ones the server drew (#state-badges): one home for colours and labels. */
export function badge(kind, state) {
  const drawn = document.querySelector("#state-badges").content.querySelector('[data-badge="' + kind + ":" + state + '"] .badge');
  if (drawn) return drawn.cloneNode(true);
  const span = document.createElement("span");
  span.className = "badge state-" + state;
  span.textContent = state;
  return span;
}

export function setNodeState(id, state) {
  document.querySelectorAll('[data-node-state="' + id + '"]').forEach((cell) => {
    if (cell.querySelector(".badge.state-" + state)) return;  // unchanged: no flash
    cell.replaceChildren(badge("node", state));
    cell.classList.remove("flash"); void cell.offsetWidth; cell.classList.add("flash");
  });
}

const known = {};  // node id → state last shown, to catch changes a lost event missed
function updateStates(snap) {
  const f = snap.node_fields;
  snap.nodes.forEach((r) => {
    const id = r[0], state = r[f.indexOf("state")];
    if (known[id] !== undefined && known[id] !== state) setNodeState(id, state);
    known[id] = state;
  });
}

// ---- parts re-read from the page ---------------------------------------------------------------
// Parts of a page re-read from the page itself (the node's audit trail, the operations page) when
// an event says they changed, so their rows look exactly as the server renders them. One read at
// a time per part; one asked for during another runs again after it.
const rereads = {};
export async function reread(id) {
  const box = document.getElementById(id);
  if (!box) return;
  const st = rereads[id] || (rereads[id] = { busy: false, dirty: false });
  if (st.busy) { st.dirty = true; return; }
  st.busy = true;
  try {
    do {
      st.dirty = false;
      const res = await fetch(location.pathname + location.search, { credentials: "same-origin" });
      if (!res.ok) throw new Error(location.pathname + ": " + res.status);
      const fresh = new DOMParser().parseFromString(await res.text(), "text/html").getElementById(id);
      if (fresh) box.replaceChildren(...fresh.childNodes);
    } while (st.dirty);
  } finally { st.busy = false; }
}

export function warn(promise) { Promise.resolve(promise).catch((e) => console.warn(e)); }

// ---- events ------------------------------------------------------------------------------------
export function prepend(listId, text, limit) {
  const list = document.getElementById(listId);
  if (!list) return;
  const empty = list.querySelector(".empty-events");
  if (empty) empty.remove();
  const li = document.createElement("li");
  li.className = "new";
  li.textContent = text;
  list.prepend(li);
  while (list.children.length > (limit || 15)) list.lastElementChild.remove();
}

function onSnapshot(snap) {
  window.__snapshot = snap;
  hooks.snapshot.forEach((fn) => fn(snap));
  updateStates(snap);
}

function onMessage(msg) {
  const d = msg.data || {};
  switch (msg.type) {
    case "fleet.snapshot": onSnapshot(d); break;
    case "node.state": setNodeState(d.id, d.state); known[d.id] = d.state; break;
    case "drain.progress":
      document.querySelectorAll('[data-drain-waiting="' + d.node + '"]').forEach((n) => { n.textContent = d.waiting_for; });
      break;
    case "audit.event":
      if (cfg.page === "node" && !(d.target_type === "node" && d.target_id === String(cfg.node_id))) break;
      prepend("events", (d.time || "").slice(11, 19) + " " + d.action + " " + d.target + " by " + d.actor + (d.reason ? " · " + d.reason : ""));
      break;
    case "scale.decision":
      if (!cfg.tier_id || cfg.tier_id === d.tier_id) prepend("scale-requests", "#" + d.id + " " + d.from_active + " → " + d.desired + " " + d.state + " by " + (d.by || d.owner) + (d.reason ? " · " + d.reason : ""), 8);
      break;
    case "autoscaler.decision":
      if (!cfg.tier_id || cfg.tier_id === d.tier_id) prepend("decisions", (d.time || "").slice(11, 19) + " " + d.action + " " + d.current + " → " + d.desired + (d.dry_run ? " (dry run)" : "") + " " + d.explanation, 8);
      break;
    default: break;
  }
  hooks.message.forEach((fn) => fn(msg));
}

// ---- actions (operators; the API enforces the role) --------------------------------------------
const $ = (id) => document.getElementById(id);

export { deadlineFields } from "../actions.js";

function done(btn, d) {
  if (d.node) { setNodeState(d.node.id, d.node.state); toast(btn.dataset.action + ": " + d.node.hostname + " is " + d.node.state); }
  else if (d.module) toast(btn.dataset.action + ": module " + d.module.serial + " is " + d.module.state);
  else if (d.driver && d.state) toast("version combination #" + d.id + " is " + d.state);
  else if (d.scale_request) toast("scale " + (d.scale_request.tier_name || d.scale_request.tier_kind) + " to " + d.scale_request.desired + ": " + d.scale_request.state);
}

function operate(btn) {
  if (!$("action-dialog")) return;
  const kind = kinds[btn.dataset.action] || {};
  $("action-deadline").value = "15";
  $("action-deadline-action").value = "alert";
  $("action-then").value = "stay";
  const shown = Object.assign({ title: btn.dataset.title, text: btn.dataset.text || "", rows: [] },
                              kind.open ? kind.open(btn) : {});
  ask(Object.assign(shown, {
    submit: async (reason) => {
      let body = { reason: reason };
      if (btn.dataset.state) body.state = btn.dataset.state;  // a version combination's next state
      if (kind.body) body = kind.body(btn, body);
      if (typeof body === "string") return body;
      if (kind.submit) return kind.submit(btn, body);
      const res = await Live.send(btn.dataset.url, body, kind.method || "POST");
      if (!res.ok) return errorText(res);
      const d = res.data || {};
      if (kind.done) kind.done(btn, d); else done(btn, d);
      hooks.action.forEach((fn) => fn(btn, d));
      return null;
    },
  }));
}

// ---- start -------------------------------------------------------------------------------------
export function start() {
  if (!cfg.page) return;
  document.addEventListener("click", (ev) => {
    const btn = ev.target.closest("button.act");
    if (btn) { ev.preventDefault(); operate(btn); }
  });
  document.querySelectorAll(".ranges .range").forEach((b) => b.addEventListener("click", () => {
    view.minutes = parseInt(b.dataset.minutes, 10);
    document.querySelectorAll(".ranges .range").forEach((x) => x.classList.toggle("on", x === b));
    const url = new URL(location.href); url.searchParams.set("minutes", view.minutes); history.replaceState(null, "", url);
    warn(refreshFigures());
  }));
  window.__snapshot = json("dash-snapshot");
  const figures = json("dash-figures") || {};
  Object.keys(figures).forEach((k) => drawFigure(k, figures[k]));
  if (window.__snapshot) { updateStates(window.__snapshot); Live.touched(); }
  let opened = 0;
  Live.connect(cfg.ws, {
    onMessage: onMessage,
    resync: async function () {
      opened += 1;
      const work = [];
      if (cfg.snapshot_url && cfg.page !== "node") work.push(Live.fetchJSON(cfg.snapshot_url).then(onSnapshot));
      hooks.resync.forEach((fn) => work.push(fn(opened > 1)));  // again: catch up with what happened while away
      if (opened > 1) work.push(refreshFigures());  // after a reconnect, the history may have moved on
      return Promise.all(work);
    },
  });
  // The history is per minute: refresh it every minute.
  setInterval(() => warn(refreshFigures()), 60000);
  window.Dashboard = Object.assign(window.Dashboard || {}, { cfg: cfg, refreshFigures: refreshFigures });
}
