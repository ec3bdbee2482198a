// Vector actions on /versions/ and the run page: validate a candidate, run a suite on a
// combination's modules, cancel a run. Each asks for a reason (it goes to the audit log),
// posts to the API and opens the run's page; an error is shown beside the button.
(function () {
  "use strict";

  function csrfToken() {
    const m = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }

  function showError(button, text) {
    let out = button.parentElement.querySelector(".vector-action-error");
    if (!out) {
      out = document.createElement("div");
      out.className = "vector-action-error bad small";
      button.parentElement.appendChild(out);
    }
    out.textContent = text;
  }

  async function act(button) {
    const reason = window.prompt(button.dataset.prompt || "Reason (goes to the audit log)", "");
    if (reason === null) return;
    const body = { reason: reason };
    if (button.dataset.suite) body.suite = Number(button.dataset.suite);
    if (button.dataset.combination) body.combination = Number(button.dataset.combination);
    button.disabled = true;
    try {
      const response = await fetch(button.dataset.url, {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": csrfToken() },
        body: JSON.stringify(body),
      });
      const data = await response.json().catch(() => ({}));
      if (!response.ok) {
        showError(button, data.detail || ("the request failed: " + response.status));
        button.disabled = false;
        return;
      }
      window.location.href = "/vector-runs/" + data.id + "/";
    } catch (err) {
      showError(button, "the request failed: " + err);
      button.disabled = false;
    }
  }

  document.addEventListener("click", function (event) {
    const button = event.target.closest("button[data-vector-action]");
    if (button) {
      event.preventDefault();
      act(button);
    }
  });
})();
