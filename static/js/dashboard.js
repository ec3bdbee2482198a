/* dashboard.js: the live pages (fleet "/", racks, tier, node). Figures come built from Python
 * (json_script #dash-figures, or the figures API for another time range) and are drawn and
 * patched with Plotly.react; the websocket (live.js) brings a snapshot each second and events
 * as they commit; actions go to the operations API and their results arrive over the socket. */
(function () {
  "use strict";

  function json(id) { const n = document.getElementById(id); return n ? JSON.parse(n.textContent) : null; }
  const cfg = json("dash-config");
  if (!cfg) return;
  const rackSpecs = json("rack-metrics");
  let minutes = cfg.minutes;
  let pct = "p50_ms";
  let rackMetric = cfg.metric || "cpu";
  let revision = 0;
  const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  // ---- figures ---------------------------------------------------------------------------------
  function gd(name) { return document.querySelector('[data-figure="' + name + '"]'); }

  function draw(name, fig) {
    const div = gd(name);
    if (!div || !fig) return;
    if (name === "latency" && div.data && div.data.length === fig.data.length) {
      // keep the chosen percentile (p50/p95/p99 buttons) across refreshes
      fig.data.forEach((t, i) => { t.visible = div.data[i].visible; });
      if (div.layout.updatemenus) fig.layout.updatemenus = div.layout.updatemenus;
    }
    if (name === "racks") { recolourRacks(fig.data[0], window.__snapshot); applyRackSpec(fig); }
    fig.layout.datarevision = ++revision;
    Plotly.react(div, fig.data, fig.layout, PLOT_CONFIG);
    if (name === "racks" && !div.__clicks) {
      div.__clicks = true;
      div.on("plotly_click", (ev) => {
        const id = ev.points && ev.points[0] && ev.points[0].customdata;
        if (id) location.href = "/nodes/" + id + "/";
      });
    }
  }

  function redraw(div) {
    div.layout.datarevision = ++revision;
    Plotly.react(div, div.data, div.layout, PLOT_CONFIG);
  }

  async function refreshFigures() {
    if (!cfg.figures_url) return;
    const figs = await Live.fetchJSON(cfg.figures_url + "?minutes=" + minutes);
    Object.keys(figs).forEach((k) => draw(k, figs[k]));
  }

  // ---- snapshot → page ---------------------------------------------------------------------------
  function pctText(v) { return v === null || v === undefined ? "–" : Math.round(v * 100) + "%"; }
  function numText(v) { return v === null || v === undefined ? "–" : String(v); }
  // "on (dry run)": the policy records decisions but scales nothing.
  function autoscalerLabel(a) { return a.enabled ? (a.dry_run ? "on (dry run)" : "on") : "off"; }

  function badge(state, colours, labels) {
    const bg = colours[state] || "#6b7385";
    const r = parseInt(bg.slice(1, 3), 16), g = parseInt(bg.slice(3, 5), 16), b = parseInt(bg.slice(5, 7), 16);
    const fg = 0.299 * r + 0.587 * g + 0.114 * b > 160 ? "#1c2230" : "#fff";
    const span = document.createElement("span");
    span.className = "badge state-" + state;
    span.style.background = bg;
    span.style.color = fg;
    span.textContent = (labels && labels[state]) || state;
    return span;
  }

  function setNodeState(id, state) {
    document.querySelectorAll('[data-node-state="' + id + '"]').forEach((cell) => {
      if (cell.querySelector(".badge.state-" + state)) return;  // unchanged: no flash
      cell.replaceChildren(badge(state, cfg.state_colours, cfg.state_labels));
      cell.classList.remove("flash"); void cell.offsetWidth; cell.classList.add("flash");
    });
  }

  function updateTiers(snap) {
    snap.tiers.forEach((t) => {
      document.querySelectorAll('[data-live-tier="' + t.id + '"]').forEach((box) => {
        box.querySelectorAll("[data-live-text]").forEach((n) => {
          const key = n.dataset.liveText;
          n.textContent = key.endsWith("_util") ? pctText(t[key]) : numText(t[key]);
        });
        box.querySelectorAll("[data-live]").forEach((n) => {
          n.style.width = Math.round(100 * Math.min(1, t[n.dataset.live] || 0)) + "%";
        });
        const auto = box.querySelector("[data-live-autoscaler]");
        if (auto && t.autoscaler) {
          auto.dataset.enabled = String(t.autoscaler.enabled);
          auto.textContent = "Autoscaler: " + autoscalerLabel(t.autoscaler);
        }
        const autoText = box.querySelector("[data-live-autoscaler-text]");
        if (autoText && t.autoscaler) autoText.textContent = autoscalerLabel(t.autoscaler);
        const size = box.querySelector('[data-action="scale"]');
        if (size) size.dataset.desired = t.active;
      });
    });
  }

  function appendLive(snap) {
    const div = gd("queue");
    if (!div || !div.data) return;
    const cutoff = Date.parse(snap.time) - minutes * 60000;
    let changed = false;
    div.data.forEach((trace) => {
      const meta = trace.meta || {};
      if (meta.role !== "live") return;
      const t = snap.tiers.find((x) => x.id === meta.tier_id);
      if (!t || t[meta.field] === null || t[meta.field] === undefined) return;
      const xs = (trace.x || []).slice(), ys = (trace.y || []).slice();
      xs.push(snap.time); ys.push(t[meta.field]);
      while (xs.length && Date.parse(xs[0]) < cutoff) { xs.shift(); ys.shift(); }
      trace.x = xs; trace.y = ys; changed = true;
    });
    if (changed) redraw(div);
  }

  function updateBreakdown(snap) {
    const div = gd("breakdown");
    if (!div || !div.data) return;
    const tiers = {};
    snap.tiers.forEach((t) => { tiers[t.id] = t; });
    div.data.forEach((trace) => {
      const meta = trace.meta || {};
      if (!meta.stage) return;
      trace.x = meta.tier_ids.map((id) => {
        const s = ((tiers[id] || {}).stages || []).find((x) => x.stage === meta.stage);
        return s ? s[pct] : 0;
      });
    });
    redraw(div);
  }

  function rackValue(row, fields, metric) {
    const spec = rackSpecs[metric];
    const v = row[fields.indexOf(spec.field)];
    if (metric === "state") return spec.states.indexOf(v);
    const age = row[fields.indexOf("age_s")];
    return age === null || age > 120 ? null : v;
  }

  function recolourRacks(trace, snap) {
    if (!trace || !snap || !rackSpecs) return;
    const f = snap.node_fields;
    const where = {};
    trace.customdata.forEach((row, y) => row.forEach((id, x) => { if (id !== null) where[id] = [y, x]; }));
    const z = trace.z.map((row) => row.slice());
    const text = trace.text.map((row) => row.slice());
    snap.nodes.forEach((r) => {
      const cell = where[r[f.indexOf("id")]];
      if (!cell) return;
      z[cell[0]][cell[1]] = rackValue(r, f, rackMetric);
      text[cell[0]][cell[1]] = r[f.indexOf("hostname")] + " · " + r[f.indexOf("state")];
    });
    trace.z = z; trace.text = text;
  }

  function applyRackSpec(fig) {
    const spec = rackSpecs[rackMetric];
    const tr = fig.data[0];
    tr.colorscale = spec.colorscale; tr.zmin = spec.zmin; tr.zmax = spec.zmax;
    tr.colorbar = Object.assign({}, tr.colorbar || {}, { title: { text: spec.label, side: "right" } });
    if (spec.format === "state") {
      tr.colorbar.tickvals = spec.states.map((_, i) => i);
      tr.colorbar.ticktext = spec.states;
      tr.hovertemplate = "%{text}<extra></extra>";
    } else {
      tr.colorbar.tickvals = null; tr.colorbar.ticktext = null;
      tr.colorbar.tickformat = spec.format === "pct" ? ".0%" : "";
      tr.hovertemplate = "%{text}<br>" + spec.label + ": %{z" + (spec.format === "pct" ? ":.0%" : ":.1f") + "}<extra></extra>";
    }
  }

  function updateRacks(snap) {
    const div = gd("racks");
    if (!div || !div.data) return;
    recolourRacks(div.data[0], snap);
    redraw(div);
  }

  function updateTierNodes(snap) {
    const f = snap.node_fields;
    snap.nodes.forEach((r) => {
      const row = document.querySelector('[data-node-row="' + r[0] + '"]');
      if (!row) return;
      row.querySelector('[data-cell="cpu"]').textContent = pctText(r[f.indexOf("cpu")]);
      row.querySelector('[data-cell="module_util"]').textContent = pctText(r[f.indexOf("module_util")]);
      row.querySelector('[data-cell="in_flight"]').textContent = numText(r[f.indexOf("in_flight")]);
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

  function onSnapshot(snap) {
    window.__snapshot = snap;
    updateTiers(snap);
    appendLive(snap);
    updateBreakdown(snap);
    updateRacks(snap);
    updateTierNodes(snap);
    updateStates(snap);
    if (cfg.page === "node") {
      const mine = snap.nodes.find((r) => r[0] === cfg.node_id);
      if (mine && known["self"] !== mine[5]) { known["self"] = mine[5]; refreshNode(); }
    }
  }

  // ---- node page -----------------------------------------------------------------------------------
  let nodeBusy = false;
  async function refreshNode() {
    if (cfg.page !== "node" || nodeBusy) return;
    nodeBusy = true;
    try {
      const n = await Live.fetchJSON(cfg.live_url);
      setNodeState(n.id, n.state);
      // what each action may do from here (the API decides; this only avoids pointless clicks)
      const can = { cordon: n.state === "active", drain: ["active", "cordoned"].includes(n.state), uncordon: !!n.hold };
      document.querySelectorAll("#node-actions button.act").forEach((b) => { b.disabled = !can[b.dataset.action]; });
      const hold = document.getElementById("node-hold");
      if (hold) hold.textContent = n.hold ? n.hold.kind + " by " + n.hold.owner + (n.hold.by ? " (" + n.hold.by + ")" : "") +
        " · " + n.hold.state + " · “" + n.hold.reason + "”" : "none";
      const waiting = document.getElementById("drain-waiting");
      if (waiting) waiting.textContent = n.hold ? n.hold.waiting_for : "nothing";
      const latest = document.getElementById("node-latest");
      if (latest && n.latest) latest.textContent = "CPU " + pctText(n.latest.cpu_util) + " · memory " + pctText(n.latest.mem_util) +
        " · " + n.latest.in_flight + " in flight · load " + n.latest.load1 + " · " + n.latest.age_s + " s ago";
      n.modules.forEach((m) => {
        const row = document.querySelector('[data-module="' + m.id + '"]');
        if (!row) return;
        const set = (k, v) => { const c = row.querySelector('[data-cell="' + k + '"]'); if (c) c.textContent = v; };
        row.querySelector('[data-cell="state"]').replaceChildren(badge(m.state, cfg.module_colours || {}, cfg.module_labels));
        const l = m.latest;
        if (!l) return;
        set("util", pctText(l.util)); set("temp_c", l.temp_c + " °C"); set("power_w", l.power_w + " W");
        set("link", "×" + l.link_width + " of ×" + l.link_width_expected);
        set("ecc_corrected", l.ecc_corrected); set("ecc_uncorrected", l.ecc_uncorrected); set("errors", l.errors);
      });
    } finally { nodeBusy = false; }
  }

  // ---- events ---------------------------------------------------------------------------------------
  function prepend(listId, text, limit) {
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

  function onMessage(msg) {
    const d = msg.data || {};
    switch (msg.type) {
      case "fleet.snapshot": onSnapshot(d); break;
      case "node.state":
        setNodeState(d.id, d.state); known[d.id] = d.state;
        if (cfg.page === "node" && d.id === cfg.node_id) refreshNode();
        break;
      case "drain.progress":
        document.querySelectorAll('[data-drain-waiting="' + d.node + '"]').forEach((n) => { n.textContent = d.waiting_for; });
        if (cfg.page === "node" && d.node === cfg.node_id) refreshNode();
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
  }

  // ---- actions (operators; the API enforces the role) -------------------------------------------------
  const dialog = document.getElementById("action-dialog");
  let pending = null;

  function toast(text, bad) {
    const t = document.getElementById("toast");
    if (!t) return;
    t.textContent = text; t.hidden = false; t.className = "toast" + (bad ? " bad" : "");
    clearTimeout(t.__timer); t.__timer = setTimeout(() => { t.hidden = true; }, 5000);
  }

  function openAction(btn) {
    if (!dialog) return;
    pending = btn;
    document.getElementById("action-title").textContent = btn.dataset.title || "Confirm";
    let text = btn.dataset.text || "";
    const desiredRow = document.getElementById("action-desired-row");
    desiredRow.hidden = btn.dataset.action !== "scale";
    if (btn.dataset.action === "scale") {
      const input = document.getElementById("action-desired");
      input.value = btn.dataset.desired; input.min = btn.dataset.min; input.max = btn.dataset.max;
      text = "Scale-up activates standby nodes; scale-down drains the least busy nodes first (min " + btn.dataset.min + ", max " + btn.dataset.max + ").";
    }
    if (btn.dataset.action === "autoscaler") {
      text = "Switch the autoscaler " + (btn.dataset.enabled === "true" ? "off" : "on") + ".";
    }
    document.getElementById("action-text").textContent = text;
    document.getElementById("action-error").hidden = true;
    document.getElementById("action-reason").value = "";
    dialog.showModal();
    document.getElementById("action-reason").focus();
  }

  async function confirmAction(ev) {
    ev.preventDefault();
    const btn = pending;
    if (!btn) return;
    const reason = document.getElementById("action-reason").value.trim();
    const err = document.getElementById("action-error");
    if (!reason) { err.textContent = "A reason is required."; err.hidden = false; return; }
    let body = { reason: reason }, method = "POST";
    if (btn.dataset.action === "scale") body.desired = parseInt(document.getElementById("action-desired").value, 10);
    if (btn.dataset.action === "autoscaler") { body = { enabled: btn.dataset.enabled !== "true", reason: reason }; method = "PATCH"; }
    const confirmBtn = document.getElementById("action-confirm");
    confirmBtn.disabled = true;
    try {
      const res = await Live.send(btn.dataset.url, body, method);
      if (!res.ok) {
        err.textContent = (res.data && res.data.detail) || ("refused (" + res.status + ")");
        err.hidden = false;
        return;
      }
      dialog.close();
      const d = res.data || {};
      if (d.node) { setNodeState(d.node.id, d.node.state); toast(btn.dataset.action + ": " + d.node.hostname + " is " + d.node.state); }
      else if (d.module) toast(btn.dataset.action + ": module " + d.module.serial + " is " + d.module.state);
      else if (d.scale_request) toast("scale " + d.scale_request.tier_kind + " to " + d.scale_request.desired + ": " + d.scale_request.state);
      else if (btn.dataset.action === "autoscaler") {
        btn.dataset.enabled = String(d.enabled);
        btn.textContent = "Autoscaler: " + autoscalerLabel(d);
        toast("autoscaler " + (d.enabled ? "on" : "off"));
      }
      refreshNode();
    } catch (e) {
      err.textContent = String(e); err.hidden = false;
    } finally { confirmBtn.disabled = false; }
  }

  document.addEventListener("click", (ev) => {
    const btn = ev.target.closest("button.act");
    if (btn) { ev.preventDefault(); openAction(btn); }
  });
  if (dialog) {
    document.getElementById("action-form").addEventListener("submit", confirmAction);
    document.getElementById("action-cancel").addEventListener("click", () => dialog.close());
  }

  // ---- controls --------------------------------------------------------------------------------------
  document.querySelectorAll(".ranges .range").forEach((b) => b.addEventListener("click", () => {
    minutes = parseInt(b.dataset.minutes, 10);
    document.querySelectorAll(".ranges .range").forEach((x) => x.classList.toggle("on", x === b));
    const url = new URL(location.href); url.searchParams.set("minutes", minutes); history.replaceState(null, "", url);
    refreshFigures().catch((e) => console.warn(e));
  }));
  const pctSelect = document.getElementById("breakdown-pct");
  if (pctSelect) pctSelect.addEventListener("change", () => { pct = pctSelect.value; if (window.__snapshot) updateBreakdown(window.__snapshot); });
  const metricSelect = document.getElementById("rack-metric");
  if (metricSelect) metricSelect.addEventListener("change", () => {
    rackMetric = metricSelect.value;
    const url = new URL(location.href); url.searchParams.set("metric", rackMetric); history.replaceState(null, "", url);
    const div = gd("racks");
    applyRackSpec({ data: div.data });
    updateRacks(window.__snapshot);
  });

  // ---- start -------------------------------------------------------------------------------------------
  window.__snapshot = json("dash-snapshot");
  const figures = json("dash-figures") || {};
  Object.keys(figures).forEach((k) => draw(k, figures[k]));
  if (window.__snapshot) { updateStates(window.__snapshot); Live.touched(); }
  let opened = 0;
  Live.connect(cfg.ws, {
    onMessage: onMessage,
    resync: async function () {
      opened += 1;
      const work = [];
      if (cfg.snapshot_url && cfg.page !== "node") work.push(Live.fetchJSON(cfg.snapshot_url).then(onSnapshot));
      if (cfg.page === "node") work.push(refreshNode());
      if (opened > 1) work.push(refreshFigures());  // after a reconnect, the history may have moved on
      return Promise.all(work);
    },
  });
  // The history is per minute: refresh it every minute; the node page's module table every 5 s.
  setInterval(() => refreshFigures().catch((e) => console.warn(e)), 60000);
  if (cfg.page === "node") setInterval(() => refreshNode().catch((e) => console.warn(e)), 5000);
  window.Dashboard = { cfg: cfg, refreshFigures: refreshFigures, refreshNode: refreshNode };
})();
