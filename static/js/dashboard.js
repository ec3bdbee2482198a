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

  // Charts hold their shape: the figure's height becomes the container's (Plotly's responsive
  // resize forgets layout.height and would fall back to the container's CSS minimum), and a
  // container grows when legend rows leave the plot area under MIN_PLOT.
  const MIN_PLOT = 210;
  function fitPlot(div) {
    const size = div._fullLayout && div._fullLayout._size;
    const short = size ? Math.ceil(MIN_PLOT - size.h) : 0;
    if (short > 1 && !div.__growing) {
      div.__growing = true;
      div.style.height = (div.clientHeight + short) + "px";
      Promise.resolve(Plotly.Plots.resize(div)).finally(() => { div.__growing = false; });
    }
  }

  function draw(name, fig) {
    const div = gd(name);
    if (!div || !fig) return;
    if (name === "latency" && div.data && div.data.length === fig.data.length) {
      // keep the chosen percentile (p50/p95/p99 buttons) across refreshes
      fig.data.forEach((t, i) => { t.visible = div.data[i].visible; });
      if (div.layout.updatemenus) fig.layout.updatemenus = div.layout.updatemenus;
    }
    if (name === "racks") { recolourRacks(fig.data[0], window.__snapshot); applyRackSpec(fig); }
    if (fig.layout.height) {
      div.style.height = Math.max(fig.layout.height, parseFloat(div.style.height) || 0) + "px";
      delete fig.layout.height;
    }
    fig.layout.datarevision = ++revision;
    if (window.Theme) Theme.layout(fig.layout);  // the page's light/dark colours (theme.js)
    Plotly.react(div, fig.data, fig.layout, PLOT_CONFIG).then(() => {
      if (!div.__shape) { div.__shape = true; div.on("plotly_afterplot", () => fitPlot(div)); }
      fitPlot(div);
    });
    if (name === "racks" && !div.__clicks) {
      div.__clicks = true;
      div.on("plotly_click", (ev) => {
        const id = ev.points && ev.points[0] && ev.points[0].customdata;
        if (id) location.href = "/nodes/" + id + "/";
      });
    }
  }

  // An empty time chart comes with a "no data yet" note over the chosen window (charts.py);
  // once points arrive (the queue chart's live tail), the note goes and the axis fits the data.
  function dropNoData(layout, data) {
    const notes = layout.annotations || [];
    if (!notes.some((a) => a.name === "no-data") || !data.some((t) => (t.x || []).length)) return;
    layout.annotations = notes.filter((a) => a.name !== "no-data");
    const xaxis = Object.assign({}, layout.xaxis, { autorange: true });
    delete xaxis.range;
    layout.xaxis = xaxis;
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

  // A state's badge, copied from the ones the server drew (#state-badges): one home for colours and labels.
  function badge(kind, state) {
    const drawn = document.querySelector('#state-badges').content.querySelector('[data-badge="' + kind + ":" + state + '"] .badge');
    if (drawn) return drawn.cloneNode(true);
    const span = document.createElement("span");
    span.className = "badge state-" + state;
    span.textContent = state;
    return span;
  }

  function setNodeState(id, state) {
    document.querySelectorAll('[data-node-state="' + id + '"]').forEach((cell) => {
      if (cell.querySelector(".badge.state-" + state)) return;  // unchanged: no flash
      cell.replaceChildren(badge("node", state));
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
    if (changed) { dropNoData(div.layout, div.data); redraw(div); }
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
  // One refresh at a time; one asked for while another is in flight (an event that came after
  // its fetch left) runs again once it ends, so the page never settles on an older answer.
  let nodeBusy = false, nodeDirty = false;
  async function refreshNode() {
    if (cfg.page !== "node") return;
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
      " · " + (n.latest.in_flight ?? "unknown") + " in flight · load " + n.latest.load1 + " · " + n.latest.age_s + " s ago";
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
      const unit = (v, u) => (v === null || v === undefined ? "–" : v + u);
      set("util", pctText(l.util)); set("temp_c", unit(l.temp_c, " °C")); set("power_w", unit(l.power_w, " W"));
      set("link", l.link_width === null ? "–" : "×" + l.link_width + " of ×" + (l.link_width_expected ?? "?"));
      set("ecc_corrected", numText(l.ecc_corrected)); set("ecc_uncorrected", numText(l.ecc_uncorrected));
      set("errors", numText(l.errors));
    });
  }

  // Parts of a page re-read from the page itself (the node's audit trail, the operations page) when
  // an event says they changed, so their rows look exactly as the server renders them. One read at
  // a time per part; one asked for during another runs again after it.
  const moduleIds = new Set([...document.querySelectorAll("[data-module]")].map((r) => r.dataset.module));
  const rereads = {};
  async function reread(id) {
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
  function refreshTrail() { return reread("node-audit"); }
  function refreshOperations() { return cfg.page === "operations" ? reread("ops-live") : Promise.resolve(); }
  function refreshAudit() { return cfg.page === "audit" ? reread("audit-rows") : Promise.resolve(); }

  function aboutThisNode(d) {
    return (d.target_type === "node" && d.target_id === String(cfg.node_id)) ||
      (d.target_type === "module" && moduleIds.has(String(d.target_id)));
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
        refreshOperations().catch((e) => console.warn(e));
        if (cfg.page === "node" && d.id === cfg.node_id) refreshNode();
        break;
      case "drain.progress":
        document.querySelectorAll('[data-drain-waiting="' + d.node + '"]').forEach((n) => { n.textContent = d.waiting_for; });
        if (cfg.page === "node" && d.node === cfg.node_id) refreshNode();
        break;
      case "audit.event":
        refreshOperations().catch((e) => console.warn(e));
        refreshAudit().catch((e) => console.warn(e));
        if (cfg.page === "node" && aboutThisNode(d)) refreshTrail().catch((e) => console.warn(e));
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

  // The autoscaler policy's fields in the dialog: [input id, API field, parse]
  const POLICY_FIELDS = [
    ["policy-enabled", "enabled"], ["policy-dry-run", "dry_run"], ["policy-target", "target_queue_per_node", parseFloat],
    ["policy-tolerance", "tolerance", parseFloat], ["policy-cooldown", "cooldown_s", (v) => parseInt(v, 10)],
    ["policy-min", "min_nodes", (v) => (v === "" ? null : parseInt(v, 10))],
    ["policy-max", "max_nodes", (v) => (v === "" ? null : parseInt(v, 10))],
  ];

  function openAction(btn) {
    if (!dialog) return;
    pending = btn;
    document.getElementById("action-title").textContent = btn.dataset.title || "Confirm";
    let text = btn.dataset.text || "";
    const desiredRow = document.getElementById("action-desired-row");
    desiredRow.hidden = btn.dataset.action !== "scale";
    // a drain (and a maintenance that drains first) takes a deadline and what to do at it
    const deadlined = ["drain", "maintenance"].includes(btn.dataset.action);
    document.getElementById("action-deadline-row").hidden = !deadlined;
    document.getElementById("action-then-row").hidden = btn.dataset.action !== "drain";
    document.getElementById("action-deadline").value = "15";
    document.getElementById("action-deadline-action").value = "alert";
    document.getElementById("action-then").value = "stay";
    if (btn.dataset.action === "scale") {
      const input = document.getElementById("action-desired");
      input.value = btn.dataset.desired; input.min = btn.dataset.min; input.max = btn.dataset.max;
      text = "Scale-up activates standby nodes; scale-down drains the least busy nodes first (min " + btn.dataset.min + ", max " + btn.dataset.max + ").";
    }
    const policyRow = document.getElementById("action-policy-row");
    policyRow.hidden = btn.dataset.action !== "autoscaler";
    if (btn.dataset.action === "autoscaler") {
      text = "The tier's autoscaler policy: the queue per node it aims at, and whether it scales or only records decisions.";
      POLICY_FIELDS.forEach(([id]) => { const el = document.getElementById(id); if (el.type === "checkbox") el.checked = false; else el.value = ""; });
      Live.fetchJSON(btn.dataset.url).then((p) => {
        POLICY_FIELDS.forEach(([id, key]) => {
          const el = document.getElementById(id);
          if (el.type === "checkbox") el.checked = !!p[key]; else el.value = p[key] === null || p[key] === undefined ? "" : p[key];
        });
      }).catch((e) => { const err = document.getElementById("action-error"); err.textContent = String(e); err.hidden = false; });
    }
    if (btn.dataset.action === "bulk") {
      btn.__nodes = picked().map((c) => ({ id: c.value, hostname: c.dataset.hostname }));
      const k = btn.__nodes.length;
      document.getElementById("action-title").textContent = btn.dataset.title + " " + k + " node" + (k === 1 ? "" : "s");
      text = "Nodes: " + btn.__nodes.map((n) => n.hostname).join(", ") + ". " + (btn.dataset.text || "");
      const isDrain = btn.dataset.bulk === "drain";
      document.getElementById("action-deadline-row").hidden = !isDrain;
      document.getElementById("action-then-row").hidden = !isDrain;
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
    if (btn.dataset.state) body.state = btn.dataset.state;  // a version combination's next state
    if (btn.dataset.action === "scale") body.desired = parseInt(document.getElementById("action-desired").value, 10);
    if (["drain", "maintenance"].includes(btn.dataset.action)) {
      const minutes = parseFloat(document.getElementById("action-deadline").value);
      if (!(minutes >= 0)) { err.textContent = "The deadline is a number of minutes, 0 for none."; err.hidden = false; return; }
      body.deadline_s = Math.round(minutes * 60);
      body.deadline_action = document.getElementById("action-deadline-action").value;
      if (btn.dataset.action === "drain") body.then = document.getElementById("action-then").value;
    }
    if (btn.dataset.action === "autoscaler") {
      body = { reason: reason }; method = "PATCH";
      POLICY_FIELDS.forEach(([id, key, parse]) => {
        const el = document.getElementById(id);
        body[key] = el.type === "checkbox" ? el.checked : parse(el.value);
      });
      const bad = POLICY_FIELDS.find(([id, key]) => typeof body[key] === "number" && isNaN(body[key]));
      if (bad) { err.textContent = "Fill in " + bad[1].replace(/_/g, " ") + "."; err.hidden = false; return; }
    }
    if (btn.dataset.action === "bulk" && btn.dataset.bulk === "drain") {
      const minutes = parseFloat(document.getElementById("action-deadline").value);
      if (!(minutes >= 0)) { err.textContent = "The deadline is a number of minutes, 0 for none."; err.hidden = false; return; }
      body.deadline_s = Math.round(minutes * 60);
      body.deadline_action = document.getElementById("action-deadline-action").value;
      body.then = document.getElementById("action-then").value;
    }
    const confirmBtn = document.getElementById("action-confirm");
    confirmBtn.disabled = true;
    if (btn.dataset.action === "bulk") {
      try { if (await confirmBulk(btn, body, err)) dialog.close(); }
      catch (e) { err.textContent = String(e); err.hidden = false; }
      finally { confirmBtn.disabled = false; }
      return;
    }
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
      else if (d.driver && d.state) toast("version combination #" + d.id + " is " + d.state);
      else if (d.scale_request) toast("scale " + d.scale_request.tier_kind + " to " + d.scale_request.desired + ": " + d.scale_request.state);
      else if (btn.dataset.action === "autoscaler") {
        btn.dataset.enabled = String(d.enabled);
        btn.textContent = "Autoscaler: " + autoscalerLabel(d);
        toast("autoscaler " + autoscalerLabel(d) + ", target " + d.target_queue_per_node + " queued per node");
      }
      refreshNode();
      refreshOperations().catch((e) => console.warn(e));
      if (cfg.page === "combinations") reread("combos").catch((e) => console.warn(e));
    } catch (e) {
      err.textContent = String(e); err.hidden = false;
    } finally { confirmBtn.disabled = false; }
  }

  // ---- node list: a selection, cordoned or drained with one confirmation naming every node ----------------
  function picked() { return [...document.querySelectorAll("#node-table input.pick:checked")]; }
  function updatePicks() {
    const n = picked().length;
    const count = document.getElementById("bulk-count");
    if (count) count.textContent = n + " selected";
    document.querySelectorAll('#bulk-bar button[data-action="bulk"]').forEach((b) => { b.disabled = n === 0; });
  }
  document.addEventListener("change", (ev) => {
    if (ev.target.id === "pick-all") document.querySelectorAll("#node-table input.pick").forEach((c) => { c.checked = ev.target.checked; });
    if (ev.target.id === "pick-all" || ev.target.classList.contains("pick")) updatePicks();
  });

  async function confirmBulk(btn, body, err) {
    const nodes = btn.__nodes || [];
    const refused = [];
    for (const n of nodes) {
      const res = await Live.send("/api/v1/nodes/" + n.id + "/" + btn.dataset.bulk + "/", body, "POST");
      if (!res.ok) refused.push(n.hostname + ": " + ((res.data && res.data.detail) || res.status));
    }
    reread("node-rows").then(updatePicks).catch((e) => console.warn(e));
    const done = nodes.length - refused.length;
    toast(btn.dataset.bulk + ": " + done + " of " + nodes.length + " node" + (nodes.length === 1 ? "" : "s") + " done", refused.length > 0);
    if (refused.length) { err.textContent = "Refused: " + refused.join("; "); err.hidden = false; return false; }
    return true;
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
      if (opened > 1) work.push(refreshOperations(), refreshAudit());  // catch up with what happened while away
      if (opened > 1) work.push(refreshFigures());  // after a reconnect, the history may have moved on
      return Promise.all(work);
    },
  });
  // The history is per minute: refresh it every minute; the node page's module table every 5 s.
  setInterval(() => refreshFigures().catch((e) => console.warn(e)), 60000);
  if (cfg.page === "node") setInterval(() => refreshNode().catch((e) => console.warn(e)), 5000);
  // what each drain waits for moves on without an event: the operations page re-reads every 5 s
  if (cfg.page === "operations") setInterval(() => refreshOperations().catch((e) => console.warn(e)), 5000);
  window.Dashboard = { cfg: cfg, refreshFigures: refreshFigures, refreshNode: refreshNode };
})();
