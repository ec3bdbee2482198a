/* health.js: the /health/ page. A finding's card offers what the server says this user may do on it
 * (button.act: the remedy's quarantine, drain or cordon, acknowledge, silence); each goes through the
 * one reason dialog (actions.js) to the API, which with the lifecycle decides, and a refusal shows
 * its text in the dialog. After an answer, and whenever the fleet says a finding, a node or a module
 * changed (live.js), the cards and the count in the page head are re-read as the server renders
 * them, keeping open lists open (not while a reason is being typed). */
import { Live } from "./live.js";
import { ask, deadlineFields, errorText, toast } from "./actions.js";

const $ = (id) => document.getElementById(id);
const PARTS = ["findings-count", "findings", "silences"];

let busy = false, dirty = false;
async function refresh() {
  if (busy) { dirty = true; return; }
  busy = true;
  try {
    do {
      dirty = false;
      const res = await fetch(location.pathname + location.search, { credentials: "same-origin" });
      if (!res.ok) throw new Error(location.pathname + ": " + res.status);
      const fresh = new DOMParser().parseFromString(await res.text(), "text/html");
      const opened = new Set([...document.querySelectorAll("details.subjects[open]")].map((d) => d.dataset.group));
      PARTS.forEach((id) => {
        const box = $(id), part = fresh.getElementById(id);
        if (box && part) box.replaceChildren(...part.childNodes);
      });
      document.querySelectorAll("details.subjects").forEach((d) => { if (opened.has(d.dataset.group)) d.open = true; });
    } while (dirty);
  } finally { busy = false; }
}
const warn = (p) => Promise.resolve(p).catch((e) => console.warn(e));

/* What an action adds to the reason: a drain's deadline, a silence's expiry. A string is an error. */
const KINDS = {
  drain: { rows: ["deadline", "then"],
           body: (b) => { const d = deadlineFields(); return typeof d === "string" ? d : Object.assign(b, d, { then: $("action-then").value }); } },
  silence: { rows: ["hours"],
             body: (b) => {
               const hours = parseFloat($("action-hours").value);
               if (!(hours > 0)) return "Say for how many hours.";
               return Object.assign(b, { expires_at: new Date(Date.now() + hours * 3600e3).toISOString() });
             } },
};

function operate(btn) {
  const kind = KINDS[btn.dataset.action] || {};
  if ($("action-deadline")) { $("action-deadline").value = "15"; $("action-deadline-action").value = "alert"; $("action-then").value = "stay"; }
  ask({
    title: btn.dataset.title, text: btn.dataset.text || "", rows: kind.rows || [],
    submit: async (reason) => {
      let body = Object.assign(btn.dataset.body ? JSON.parse(btn.dataset.body) : {}, { reason: reason });
      if (kind.body) body = kind.body(body);
      if (typeof body === "string") return body;
      if (btn.dataset.urls) return each(btn, JSON.parse(btn.dataset.urls), body);
      const res = await Live.send(btn.dataset.url, body, "POST");
      if (!res.ok) return errorText(res);
      const d = res.data || {};
      toast(btn.dataset.title + ": " + (d.module ? "module " + d.module.serial + " is " + d.module.state
        : d.node ? d.node.hostname + " is " + d.node.state : d.state ? d.state : "done"));
      await warn(refresh());
      return null;
    },
  });
}

/* One reason for several findings (a card's "acknowledge all"): each one posted, the refusals listed. */
async function each(btn, urls, body) {
  const refused = [];
  for (const url of urls) {
    const res = await Live.send(url, body, "POST");
    if (!res.ok) refused.push(errorText(res));
  }
  await warn(refresh());
  if (refused.length) return (urls.length - refused.length) + " of " + urls.length + " done; " + refused.join("; ");
  toast(btn.dataset.title + ": done");
  return null;
}

document.addEventListener("click", (ev) => {
  const btn = ev.target.closest("button.act");
  if (btn) { ev.preventDefault(); operate(btn); }
});

const dialog = $("action-dialog");
let pending = null;
function later() {
  if (pending) return;
  pending = setInterval(() => {
    if (dialog && dialog.open) return;  // a reason is being typed
    const el = document.activeElement;
    if (el && (el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA") && el.value) return;
    clearInterval(pending); pending = null;
    warn(refresh());
  }, 1000);
}
let opened = 0;
Live.connect("/ws/fleet/", {
  onMessage(msg) {
    const d = msg.data || {};
    if (msg.type === "health.finding" || msg.type === "node.state" ||
        (msg.type === "audit.event" && /^(health\.|module\.|node\.)/.test(d.action || ""))) later();
  },
  resync: () => (++opened > 1 ? refresh() : null),  // after a reconnect: what changed while away
});
