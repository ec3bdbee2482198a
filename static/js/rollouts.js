/* Rollout pages: the rollout page follows the rollout over the websocket (each rollout event
 * re-reads its state, progress, nodes and the cohort chart from the API; every 3 s instead while the
 * socket is down) and sends the operator's controls (with a reason); the new-rollout page shows the
 * preview and starts the rollout. Everything is escaped before it reaches the page. */
(function () {
  "use strict";
  const cfgNode = document.getElementById("rollout-config");
  if (!cfgNode) return;
  const cfg = JSON.parse(cfgNode.textContent);
  const esc = (s) => String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const $ = (id) => document.getElementById(id);

  function errorText(res) {
    const d = res.data || {};
    const fields = d.errors ? Object.entries(d.errors).map(([k, v]) => k + ": " + v.join(" ")).join("; ") : "";
    return (d.detail || ("HTTP " + res.status)) + (fields ? " (" + fields + ")" : "");
  }

  /* ---- the rollout page ---- */
  if (cfg.api) {
    const stepColour = (s) => cfg.step_colours[s] || "#5f6779";
    async function refresh() {
      let r, nodes;
      try {
        r = await Live.fetchJSON(cfg.api);
        nodes = await Live.fetchJSON(cfg.api + "nodes/?limit=1000");
      } catch (e) { return; }
      const state = $("rollout-state");
      state.textContent = r.state.replace("_", " ");
      state.style.background = cfg.state_colours[r.state] || "#5f6779";
      $("rollout-waiting").textContent = r.waiting_for || "—";
      $("rollout-message").textContent = r.message || "";
      $("rollout-message-row").hidden = !r.message;
      const p = r.progress;
      $("progress-all").max = p.nodes; $("progress-all").value = p.settled;
      $("progress-all-text").textContent = p.done + "/" + p.nodes + " done, " + p.settled + " settled";
      for (const w of p.waves) {
        const row = document.querySelector('[data-wave="' + w.index + '"]');
        if (!row) continue;
        const bar = row.querySelector("progress");
        bar.max = w.nodes; bar.value = w.settled;
        row.querySelector(".wave-text").textContent = w.done + "/" + w.nodes + " done";
      }
      const rows = Array.isArray(nodes) ? nodes : nodes.results;
      $("rollout-nodes").querySelector("tbody").innerHTML = rows.map((n) =>
        '<tr data-node="' + n.node + '"><td>' + (n.wave === null ? "—" : n.wave === 0 ? "canary" : n.wave) +
        '</td><td><a href="/nodes/' + n.node + '/">' + esc(n.hostname) + '</a> <span class="small muted">' +
        esc(n.node_state) + '</span></td><td><span class="badge" style="background:' + stepColour(n.step) + '">' +
        esc(n.step.replace("_", " ")) + "</span>" + (n.rollback_phase ? ' <span class="small">(' +
        esc(n.rollback_phase) + ")</span>" : "") + '</td><td class="small">' + esc(n.waiting_for || n.reason) +
        '</td><td class="mono small">' + esc(n.lkg_driver) + " + " + esc(n.lkg_framework) + '</td><td class="small">' +
        (n.vector_run ? "#" + n.vector_run : "") + '</td><td class="nowrap small">' +
        esc((n.step_changed_at || "").slice(11, 19)) + "</td></tr>").join("");
      $("rollout-gates").textContent = r.gates.length ? r.gates.map((g) => JSON.stringify(g)).join("\n")
        : "No gate evaluated yet.";
    }
    /* ---- the cohort chart: per-stage p95 per minute, upgraded (solid) against control (dotted) ---- */
    const STAGE_COLOURS = ["#5b6ee1", "#2e9d5b", "#e07b00", "#c0392b", "#8e44ad", "#3a8fb7"];
    let chartAt = 0;
    async function refreshChart() {
      chartAt = Date.now();
      let c;
      try { c = await Live.fetchJSON(cfg.api + "cohorts/"); } catch (e) { return; }
      const traces = [];
      const stages = [];
      for (const name of ["upgraded", "control"]) {
        for (const p of c.cohorts[name].points) {
          for (const st of Object.keys(p.p95_ms)) if (!stages.includes(st)) stages.push(st);
        }
      }
      stages.forEach((st, i) => {
        for (const name of ["upgraded", "control"]) {
          const pts = c.cohorts[name].points.filter((p) => p.p95_ms[st] !== undefined);
          if (!pts.length) continue;
          traces.push({
            x: pts.map((p) => p.minute), y: pts.map((p) => p.p95_ms[st]), type: "scatter", mode: "lines+markers",
            name: name + " (" + c.cohorts[name].nodes + ") · " + st, legendgroup: st,
            line: { color: STAGE_COLOURS[i % STAGE_COLOURS.length], dash: name === "upgraded" ? "solid" : "dot",
                    width: name === "upgraded" ? 2.5 : 1.5 },
            marker: { size: 4 },
          });
        }
      });
      const layout = {
        margin: { l: 50, r: 10, t: 10, b: 40 }, height: 300, yaxis: { title: "p95 ms", rangemode: "tozero" },
        legend: { orientation: "h", y: -0.25 }, paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
        annotations: traces.length ? [] : [{ text: "No per-node stage figures for either cohort yet", showarrow: false,
          xref: "paper", yref: "paper", x: 0.5, y: 0.5 }],
        xaxis: { visible: traces.length > 0 },
      };
      if (window.Plotly) Plotly.react("cohort-chart", traces, layout, { displayModeBar: false, responsive: true });
      const g = c.gate;
      $("cohort-gate").textContent = g ? "Cohort gate, wave " + g.wave + ": " + (g.ok ? "passed" : "FAILED") +
        (g.acknowledged ? " (resumed past by " + g.acknowledged + ")" : "") + " — " + g.detail
        : "Cohort gate: not evaluated yet (after the first wave's bake).";
      $("cohort-gate").className = "small" + (g && !g.ok ? " bad" : "");
    }

    /* Live: rollout events on the fleet socket re-read the page (coalesced); while the socket is
     * down, poll every 3 s. What a node waits for counts down without events: re-read every 15 s. */
    let pending = null;
    let lastRefresh = 0;
    function soon(chart) {
      if (chart) chartAt = 0;
      if (pending) return;
      pending = setTimeout(() => { pending = null; tick(); }, 250);
    }
    async function tick() {
      lastRefresh = Date.now();
      await refresh();
      if (Date.now() - chartAt > 15000) await refreshChart();
    }
    const mine = (d) => d && (d.rollout === cfg.id || d.id === cfg.id);
    let events = 0;
    Live.connect(cfg.ws, {
      onMessage: (msg) => {
        if (typeof msg.type === "string" && msg.type.startsWith("rollout.") && mine(msg.data)) {
          events += 1;
          soon(msg.type !== "rollout.node");
        }
      },
      resync: () => { chartAt = 0; return tick(); },
    });
    setInterval(() => {
      const live = Live.state.status === "live";
      if (!live || Date.now() - lastRefresh > 15000) tick();
    }, 3000);
    refreshChart();
    window.RolloutPage = { refresh: tick, refreshChart: refreshChart, events: () => events };
    const controls = $("rollout-controls");
    if (controls) {
      controls.addEventListener("click", async (ev) => {
        const what = ev.target.getAttribute("data-control");
        if (!what) return;
        const reason = window.prompt("Reason for " + what + " (goes to the audit log)");
        if (reason === null) return;
        const res = await Live.send(cfg.api + what + "/", { reason: reason });
        $("control-error").hidden = res.ok;
        if (!res.ok) $("control-error").textContent = errorText(res);
        soon(true);
      });
    }
  }

  /* ---- the new-rollout page ---- */
  if (cfg.preview) {
    const form = $("rollout-form");
    /* "3" is a number of nodes, "10%" a share of each tier's nodes; anything else goes as typed (the API names it). */
    const canaryOf = (v) => (/^\d+$/.test(v) ? Number(v) : v);
    const body = () => {
      const f = new FormData(form);
      const multi = (name) => Array.from(form.elements[name].selectedOptions).map((o) => Number(o.value));
      return {
        combination: cfg.combination, module_type: cfg.module_type, suite: cfg.suite,
        tiers: multi("tiers"), racks: multi("racks"), canary: canaryOf(String(f.get("canary")).trim()),
        wave_size: Number(f.get("wave_size")), max_unavailable: String(f.get("max_unavailable")),
        bake_s: Number(f.get("bake_s")), on_failure: String(f.get("on_failure")),
      };
    };
    function render(p) {
      const waves = p.waves.map((w) =>
        "<h3>" + (w.canary ? "Canary" : "Wave " + w.index) + " — " + w.nodes.length + " node(s)</h3><ul class=\"small\">" +
        w.nodes.map((n) => "<li>" + esc(n.hostname) + (n.serving ? "" : " (standby)") + ": " +
          esc((n.from[0] || {}).driver) + " + " + esc((n.from[0] || {}).framework) + " → " + esc(n.to.driver) +
          " + " + esc(n.to.framework) + "</li>").join("") + "</ul><table class=\"list small\"><tr><th>Tier</th>" +
        "<th>Active before</th><th>Out</th><th>Active during</th><th>Floor</th><th>Need</th><th></th></tr>" +
        w.capacity.map((c) => "<tr><td>" + esc(c.tier_name) + "</td><td>" + c.active_before + "</td><td>" + c.out +
          "</td><td>" + c.active_during + "</td><td>" + c.floor + "</td><td>" + c.need + "</td><td>" +
          (c.ok ? "ok" : '<span class="bad">below floor</span>') + "</td></tr>").join("") + "</table>").join("");
      const skipped = p.skipped.length ? "<h3>Skipped</h3><ul class=\"small\">" + p.skipped.map((s) =>
        "<li>" + esc(s.hostname) + ": " + esc(s.reason) + "</li>").join("") + "</ul>" : "";
      const gates = "<h3>Gates now (dry run)</h3><ul class=\"small\">" + Object.entries(p.gates).map(([k, g]) =>
        "<li>" + esc(k) + ": " + (g.ok ? "ok" : '<span class="bad">not ok</span>') + " — " +
        esc(g.detail || g.state || "") + "</li>").join("") + "</ul>";
      $("preview-body").innerHTML = waves + skipped + gates;
      $("preview").hidden = false;
    }
    $("preview-button").addEventListener("click", async () => {
      const res = await Live.send(cfg.preview, body());
      $("preview-error").hidden = res.ok;
      if (!res.ok) { $("preview-error").textContent = errorText(res); $("preview").hidden = true; return; }
      render(res.data);
    });
    const start = $("start-button");
    if (start) {
      start.addEventListener("click", async () => {
        const reason = $("rollout-reason").value.trim();
        if (!reason) { $("preview-error").hidden = false; $("preview-error").textContent = "Say why (reason)."; return; }
        if (!window.confirm("Start the rollout now?")) return;
        const res = await Live.send(cfg.create, Object.assign(body(), { reason: reason }));
        if (res.ok) { window.location = "/rollouts/" + res.data.id + "/"; return; }
        $("preview-error").hidden = false;
        $("preview-error").textContent = errorText(res);
      });
    }
  }
})();
