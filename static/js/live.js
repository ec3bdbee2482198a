/* live.js: the live connection every page uses (an ES module).
 *
 * Live.connect(path, handlers) opens /ws/... and keeps it open: on close it reconnects with
 * exponential backoff and jitter; on every open it calls handlers.resync() (re-fetch the
 * snapshot over REST), so a message lost while disconnected never leaves a stale screen.
 * A refusal (close code 4403: not signed in / no role) stops retrying.
 * The status indicator (#live-status) says "live" or "paused · reconnecting…" with the age of the data,
 * and "updates failing" while the server's broadcaster reports failed ticks (broadcast.health frames).
 * While the socket is down every live list (class "live-list") shows as paused (body.live-paused);
 * the resync on reconnect catches them up.
 * Live.send posts with the session's CSRF token (csrfToken(): the one place that reads the cookie).
 * The page modules call through the Live object (tests replace Live.fetchJSON to hold a refresh).
 */
const state = { lastData: null, socket: null, status: "connecting", closedCode: null, broadcast: null };

function el(id) { return document.getElementById(id); }

function ageText() {
  if (!state.lastData) return "";
  const s = Math.max(0, (Date.now() - state.lastData) / 1000);
  return s < 1.5 ? "" : " · data " + (s < 90 ? Math.round(s) + " s" : Math.round(s / 60) + " min") + " old";
}

function renderStatus() {
  const box = el("live-status");
  if (!box) return;
  // Connected, but the server's broadcaster says its ticks fail: the data has stopped, and why.
  const shown = state.status === "live" && state.broadcast ? "degraded" : state.status;
  box.className = "live-status live-" + shown;
  const text = { live: "live", connecting: "connecting…", reconnecting: "paused · reconnecting…", refused: "not allowed",
                 degraded: "updates failing" };
  document.body.classList.toggle("live-paused", shown === "reconnecting");
  let line = (text[shown] || shown) + ageText();
  if (shown === "degraded") {
    const b = state.broadcast;
    line += " · " + b.failures + " tick" + (b.failures === 1 ? "" : "s") + " in a row";
    box.title = "The server's broadcaster fails since " + b.since + ": " + b.error;
  } else if (shown === "reconnecting") {
    box.title = "The websocket is down: live lists are paused and catch up when it is back";
  } else {
    box.title = "Websocket state and the age of the newest data";
  }
  box.querySelector(".live-text").textContent = line;
  box.dataset.state = shown;
}
setInterval(renderStatus, 1000);

function setStatus(s) { state.status = s; renderStatus(); }
function touched() { state.lastData = Date.now(); renderStatus(); }

function cookie(name) {
  const m = document.cookie.match(new RegExp("(?:^|; )" + name + "=([^;]*)"));
  return m ? decodeURIComponent(m[1]) : "";
}

export function csrfToken() { return cookie("csrftoken"); }

function uuid() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
  return "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx".replace(/[xy]/g, (c) => {
    const r = (Math.random() * 16) | 0;
    return (c === "x" ? r : (r & 0x3) | 0x8).toString(16);
  });
}

async function fetchJSON(url) {
  const res = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (!res.ok) throw new Error(url + ": " + res.status);
  return res.json();
}

/* POST (or PATCH) an action with the session, the CSRF token and a fresh Idempotency-Key. */
async function send(url, body, method) {
  const res = await fetch(url, {
    method: method || "POST", credentials: "same-origin",
    headers: {
      "Content-Type": "application/json", Accept: "application/json",
      "X-CSRFToken": csrfToken(), "Idempotency-Key": uuid(),
    },
    body: JSON.stringify(body || {}),
  });
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  return { ok: res.ok, status: res.status, data: data };
}

function connect(path, handlers) {
  let attempt = 0;
  let timer = null;
  const proto = location.protocol === "https:" ? "wss://" : "ws://";

  function schedule() {
    // 0.5 s, 1 s, 2 s … capped at 15 s, with ±30 % jitter so clients don't reconnect in step.
    const base = Math.min(15000, 500 * Math.pow(2, attempt));
    const delay = base * (0.7 + Math.random() * 0.6);
    attempt += 1;
    clearTimeout(timer);
    timer = setTimeout(open, delay);
  }

  function open() {
    let ws;
    try { ws = new WebSocket(proto + location.host + path); } catch (e) { setStatus("reconnecting"); schedule(); return; }
    state.socket = ws;
    ws.onopen = function () {
      attempt = 0;
      setStatus("live");
      if (handlers.resync) {
        Promise.resolve(handlers.resync()).then(touched).catch((e) => console.warn("resync failed", e));
      }
    };
    ws.onmessage = function (ev) {
      let msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      if (msg.type === "broadcast.health") {  // about the data, not data: its age keeps growing
        state.broadcast = msg.data && !msg.data.ok ? msg.data : null;
        renderStatus();
        return;
      }
      if (msg.type === "fleet.snapshot") state.broadcast = null;  // a tick went through
      touched();
      if (handlers.onMessage) handlers.onMessage(msg);
    };
    ws.onclose = function (ev) {
      state.closedCode = ev.code;
      if (ev.code === 4403) { setStatus("refused"); return; }
      setStatus("reconnecting");
      schedule();
    };
  }

  // Reconnect at once when the tab comes back or the network returns.
  window.addEventListener("online", () => { if (!state.socket || state.socket.readyState > 1) { attempt = 0; open(); } });
  open();
  return { close: () => { clearTimeout(timer); if (state.socket) state.socket.close(); } };
}

export const Live = { connect, fetchJSON, send, touched, uuid, state };
window.Live = Live;  // for the browser console and the browser tests
