/* health.js: the /health/ page, over the shared live connection (live.js). A finding opened,
 * escalated or resolved anywhere reloads the list (not while you type a reason). */
import { Live } from "./live.js";

let pending = null;
Live.connect("/ws/fleet/", {
  onMessage(msg) {
    if (msg.type !== "health.finding" || pending) return;
    pending = setInterval(() => {
      const el = document.activeElement;
      if (el && (el.tagName === "INPUT" || el.tagName === "SELECT") && el.value) return;
      location.reload();
    }, 1000);
  },
});
