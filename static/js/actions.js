/* actions.js: what every operator action of the pages shares. One reason dialog (#action-dialog,
 * templates/dashboard/_action_dialog.html: the reason goes to the audit log), one error text for a
 * refused request, one toast, one esc() for text put into HTML. The CSRF token and the
 * Idempotency-Key are live.js's (Live.send).
 *
 * ask({title, text, rows, submit}) opens the dialog with the named optional rows shown;
 * submit(reason) posts and returns an error text to show in the dialog, or nothing to close it. */
import { Live } from "./live.js";

export const esc = (s) => String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g,
  (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

/* What the API said when it refused: its detail, and each field's errors. */
export function errorText(res) {
  const d = res.data || {};
  const fields = d.errors ? Object.entries(d.errors).map(([k, v]) => k + ": " + [].concat(v).join(" ")).join("; ") : "";
  return (d.detail || ("refused (" + res.status + ")")) + (fields ? " (" + fields + ")" : "");
}

export function send(url, body, method) { return Live.send(url, body, method); }

export function toast(text, bad) {
  const t = document.getElementById("toast");
  if (!t) return;
  t.textContent = text; t.hidden = false; t.className = "toast" + (bad ? " bad" : "");
  clearTimeout(t.__timer); t.__timer = setTimeout(() => { t.hidden = true; }, 5000);
}

const $ = (id) => document.getElementById(id);
const dialog = $("action-dialog");
// The dialog's optional rows; an action names the ones it needs.
const ROWS = { desired: "action-desired-row", deadline: "action-deadline-row", then: "action-then-row",
               policy: "action-policy-row", hours: "action-hours-row" };
let pending = null;

/* A drain's deadline and what to do at it, from the dialog; a string when the input is wrong. */
export function deadlineFields() {
  const minutes = parseFloat($("action-deadline").value);
  if (!(minutes >= 0)) return "The deadline is a number of minutes, 0 for none.";
  return { deadline_s: Math.round(minutes * 60), deadline_action: $("action-deadline-action").value };
}

export function dialogError(text) {
  const err = $("action-error");
  if (!err) return;
  err.textContent = text; err.hidden = !text;
}

export function ask({ title, text, rows, submit }) {
  if (!dialog) return false;
  pending = submit;
  $("action-title").textContent = title || "Confirm";
  $("action-text").textContent = text || "";
  Object.entries(ROWS).forEach(([name, id]) => { $(id).hidden = !(rows || []).includes(name); });
  dialogError("");
  $("action-reason").value = "";
  dialog.showModal();
  $("action-reason").focus();
  return true;
}

async function confirm(ev) {
  ev.preventDefault();
  if (!pending) return;
  const reason = $("action-reason").value.trim();
  if (!reason) { dialogError("A reason is required."); return; }
  const button = $("action-confirm");
  button.disabled = true;
  try {
    const refused = await pending(reason);
    if (refused) dialogError(refused); else dialog.close();
  } catch (e) {
    dialogError(String(e));
  } finally { button.disabled = false; }
}

if (dialog) {
  $("action-form").addEventListener("submit", confirm);
  $("action-cancel").addEventListener("click", () => dialog.close());
}
