/* windows.js: the change windows and freezes page. Admins add a window or a freeze from its form and
 * delete one with a reason (the reason dialog of actions.js); each goes to the API, which checks and
 * audits it; a refusal is shown beside the form, naming the field. The page is read again after a
 * change (the calendar is the server's). */
import { ask, errorText, send, toast } from "../actions.js";

const cfg = JSON.parse(document.getElementById("windows-config").textContent);
const $ = (id) => document.getElementById(id);

const ids = (form, name) => Array.from(form.elements[name].selectedOptions).map((o) => Number(o.value));
/* A datetime-local value read as UTC (the page's calendar is in UTC). */
const utc = (v) => (v ? v + ":00Z" : null);

function showError(id, text) {
  const p = $(id);
  p.textContent = text || "";
  p.hidden = !text;
}

async function add(url, body, errorId, what) {
  showError(errorId, "");
  const res = await send(url, body);
  if (!res.ok) { showError(errorId, errorText(res)); return; }
  toast(what + " added");
  location.reload();
}

const windowForm = $("window-form");
if (windowForm) {
  $("window-add").addEventListener("click", () => {
    const f = new FormData(windowForm);
    add(cfg.windows, {
      name: String(f.get("name")).trim(), cron: String(f.get("cron")).trim(),
      duration_minutes: Number(f.get("duration_minutes")), time_zone: String(f.get("time_zone")).trim(),
      tiers: ids(windowForm, "tiers"), racks: ids(windowForm, "racks"), actors: f.getAll("actors").map(String),
      reason: String(f.get("reason") || ""),
    }, "window-error", "Window");
  });
}

const freezeForm = $("freeze-form");
if (freezeForm) {
  $("freeze-add").addEventListener("click", () => {
    const f = new FormData(freezeForm);
    add(cfg.freezes, {
      starts_at: utc(String(f.get("starts_at"))), ends_at: utc(String(f.get("ends_at"))),
      tiers: ids(freezeForm, "tiers"), racks: ids(freezeForm, "racks"), reason: String(f.get("reason")).trim(),
    }, "freeze-error", "Freeze");
  });
}

document.querySelectorAll("button.delete").forEach((b) => b.addEventListener("click", () => ask({
  title: b.dataset.title, text: "Actors it governed act as the remaining windows and freezes say.",
  submit: async (reason) => {
    const res = await send(b.dataset.url, { reason }, "DELETE");
    if (!res.ok && res.status !== 204) return errorText(res);
    location.reload();
    return "";
  },
})));
