/* vectors.js: vector actions on /versions/ and the run page: validate a candidate, run a suite on a
 * combination's modules, cancel a run. Each asks for a reason in the action dialog (it goes to the
 * audit log), posts to the API and opens the run's page; a refusal shows in the dialog. */
import { ask, errorText, send } from "./actions.js";

function act(button) {
  ask({
    title: button.textContent.trim(),
    text: button.dataset.prompt || "Reason (goes to the audit log)",
    async submit(reason) {
      const body = { reason: reason };
      if (button.dataset.suite) body.suite = Number(button.dataset.suite);
      if (button.dataset.combination) body.combination = Number(button.dataset.combination);
      const res = await send(button.dataset.url, body);
      if (!res.ok) return errorText(res);
      window.location.href = "/vector-runs/" + res.data.id + "/";
      return null;
    },
  });
}

// A live run's page re-reads itself every 3 s, but not while the operator types a reason.
if (document.getElementById("run-cancel")) {
  setInterval(() => { if (!document.getElementById("action-dialog").open) location.reload(); }, 3000);
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-vector-action]");
  if (button) {
    event.preventDefault();
    act(button);
  }
});
