/* palette.js: the command palette (Ctrl-K or ⌘K, or the top bar's "Go to…" button), on every page.
 *
 * Type to find, in this order: the actions of the page in view (its enabled action buttons, e.g. "Drain
 * n-r1-07", which open the usual confirmation dialog), the pages of the top bar, the theme, and nodes
 * by hostname (the inventory API's search, asked at most once per pause in typing). ↑ ↓ move, Enter runs,
 * Escape closes. The input is a combobox that owns the listbox and points at the chosen option with
 * aria-activedescendant, so a screen reader follows the choice while the focus stays in the input. */
(function () {
  "use strict";
  const dialog = document.getElementById("palette");
  if (!dialog) return;
  const input = document.getElementById("palette-input");
  const list = document.getElementById("palette-list");
  const DEBOUNCE_MS = 180;
  const NODE_LIMIT = 8;
  let items = [];
  let active = 0;
  let nodes = [];
  let nodeQuery = "";
  let timer = null;
  let asked = 0;

  function words(q) { return q.toLowerCase().split(/\s+/).filter(Boolean); }
  function matches(text, ws) { const t = text.toLowerCase(); return ws.every((w) => t.includes(w)); }
  function visible(el) { return !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length); }

  // The page's own actions: what an operator could click here now (viewers have none).
  function pageActions() {
    const seen = new Set();
    return [...document.querySelectorAll("button.act")].filter((b) => !b.disabled && visible(b)).map((b) => {
      const label = (b.dataset.title || b.textContent).trim().replace(/…$/, "");
      // found by its title, its button's words and its action's name ("scale" finds "Set the size of …")
      return { kind: "action", label: label, hint: b.dataset.action === "bulk" ? "selected nodes" : "confirm first",
               words: [b.textContent, b.dataset.action || "", b.dataset.bulk || ""].join(" "), run: () => b.click() };
    }).filter((it) => !seen.has(it.label) && seen.add(it.label));
  }

  function pages() {
    return [...document.querySelectorAll(".mainnav a[href]")].map((a) => ({
      kind: "page", label: a.textContent.trim(), hint: a.getAttribute("href"), run: () => { location.href = a.href; },
    }));
  }

  function themes() {
    if (!window.Theme) return [];
    const dark = window.Theme.current() === "dark";
    const out = [{ kind: "theme", label: dark ? "Light theme" : "Dark theme", hint: "remembered",
                   run: () => window.Theme.set(dark ? "light" : "dark") }];
    if (window.Theme.stored()) out.push({ kind: "theme", label: "Theme: follow the system", hint: "prefers-color-scheme",
                                          run: () => window.Theme.set(null) });
    return out;
  }

  function nodeItems(q) {
    if (q !== nodeQuery) return [];
    return nodes.map((n) => ({
      kind: "node", label: n.hostname, hint: [n.state, n.tier_name || n.tier_kind, n.rack_name].filter(Boolean).join(" · "),
      run: () => { location.href = "/nodes/" + n.id + "/"; },
    }));
  }

  function render() {
    const q = input.value.trim();
    const ws = words(q);
    const local = [...pageActions(), ...pages(), ...themes()].filter((it) => matches(it.label + " " + it.kind + " " + (it.words || ""), ws));
    items = [...local, ...nodeItems(q)];
    if (q.length >= 2) items.push({ kind: "search", label: "Search the nodes for “" + q + "”", hint: "/nodes/?q=",
                                    run: () => { location.href = "/nodes/?q=" + encodeURIComponent(q); } });
    active = Math.min(active, Math.max(0, items.length - 1));
    list.replaceChildren(...items.map((it, i) => {
      const li = document.createElement("li");
      li.id = "palette-opt-" + i;
      li.setAttribute("role", "option");
      li.dataset.kind = it.kind;
      const kind = document.createElement("span"); kind.className = "kind"; kind.textContent = it.kind;
      const label = document.createElement("span"); label.className = "label-text"; label.textContent = it.label;
      const hint = document.createElement("span"); hint.className = "hint"; hint.textContent = it.hint || "";
      li.append(kind, label, hint);
      li.addEventListener("mousemove", () => { if (active !== i) { active = i; mark(); } });
      li.addEventListener("click", () => choose(i));
      return li;
    }));
    if (!items.length) {
      const li = document.createElement("li");
      li.className = "none"; li.setAttribute("role", "option"); li.setAttribute("aria-disabled", "true");
      li.id = "palette-none";
      li.textContent = "Nothing matches “" + q + "”";
      list.append(li);
    }
    mark();
  }

  function mark() {
    [...list.children].forEach((li, i) => li.setAttribute("aria-selected", String(i === active && items.length > 0)));
    const cur = items.length ? document.getElementById("palette-opt-" + active) : null;
    input.setAttribute("aria-activedescendant", cur ? cur.id : "");
    if (cur) cur.scrollIntoView({ block: "nearest" });
  }

  // Nodes by hostname from the inventory API, once typing pauses; an answer to an older query is dropped.
  function askNodes() {
    clearTimeout(timer);
    const q = input.value.trim();
    if (q.length < 2) { nodes = []; nodeQuery = q; return; }
    timer = setTimeout(async () => {
      const mine = ++asked;
      try {
        const res = await fetch("/api/v1/nodes/?limit=" + NODE_LIMIT + "&ordering=hostname&search=" + encodeURIComponent(q),
                                { credentials: "same-origin", headers: { Accept: "application/json" } });
        if (!res.ok) return;
        const data = await res.json();
        if (mine !== asked || !dialog.open) return;
        nodes = (data.results || data).filter((n) => n.hostname.toLowerCase().includes(q.toLowerCase()));
        nodeQuery = q;
        render();
      } catch (e) { console.warn("palette: node search failed", e); }
    }, DEBOUNCE_MS);
  }

  function choose(i) {
    const it = items[i];
    if (!it) return;
    dialog.close();
    it.run();
  }

  function open() {
    if (dialog.open) return;
    input.value = ""; active = 0; nodes = []; nodeQuery = "";
    render();
    dialog.showModal();
    input.focus();
  }

  input.addEventListener("input", () => { active = 0; render(); askNodes(); });
  input.addEventListener("keydown", (ev) => {
    const n = items.length;
    if (ev.key === "ArrowDown" && n) { ev.preventDefault(); active = (active + 1) % n; mark(); }
    else if (ev.key === "ArrowUp" && n) { ev.preventDefault(); active = (active - 1 + n) % n; mark(); }
    else if (ev.key === "Home" && n && ev.ctrlKey) { ev.preventDefault(); active = 0; mark(); }
    else if (ev.key === "End" && n && ev.ctrlKey) { ev.preventDefault(); active = n - 1; mark(); }
    else if (ev.key === "Enter") { ev.preventDefault(); choose(active); }
  });
  // a click on the backdrop (outside the box) closes, as Escape does
  dialog.addEventListener("click", (ev) => { if (ev.target === dialog) dialog.close(); });
  dialog.addEventListener("close", () => { clearTimeout(timer); asked += 1; });

  document.addEventListener("keydown", (ev) => {
    if (!(ev.ctrlKey || ev.metaKey) || ev.altKey || (ev.key || "").toLowerCase() !== "k") return;
    if (dialog.open) { ev.preventDefault(); dialog.close(); return; }
    if (document.querySelector("dialog[open]")) return;  // another dialog (a confirmation) has the keyboard
    ev.preventDefault();
    open();
  });
  const opener = document.getElementById("palette-open");
  if (opener) opener.addEventListener("click", open);

  window.Palette = { open: open };
})();
