/* theme.js: light or dark. Loaded in <head> (before the first paint) on every page.
 *
 * The theme follows the system's prefers-color-scheme until the top bar's toggle (#theme-toggle) picks one;
 * that choice is remembered in localStorage ("cp-theme") and "follow the system" (the command palette)
 * forgets it. The resolved theme is <html data-theme="light|dark">: app.css keys every colour on it.
 * Plotly charts follow: Theme.layout(layout) gives a figure's layout the theme's paper, plot, font and grid
 * colours before it is drawn, and a change of theme restyles every chart on the page in place. */
(function () {
  "use strict";
  const KEY = "cp-theme";
  const media = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  const COLOURS = {
    light: { paper: "#ffffff", plot: "#ffffff", font: "#1c2230", muted: "#5f6779", grid: "#eef0f4", line: "#c9ced8", menu: "#f3f5f9", active: "#dce6fb" },
    dark: { paper: "#181e2b", plot: "#181e2b", font: "#e2e6ee", muted: "#a3abbb", grid: "#2f3848", line: "#46506a", menu: "#232b3c", active: "#2f5bd3" },
  };

  function stored() {
    try { const v = localStorage.getItem(KEY); return v === "dark" || v === "light" ? v : null; } catch (e) { return null; }
  }
  function current() { return stored() || (media && media.matches ? "dark" : "light"); }
  function colours() { return COLOURS[document.documentElement.dataset.theme === "dark" ? "dark" : "light"]; }

  const TRANSPARENT = /^rgba\(\s*0\s*,\s*0\s*,\s*0\s*,\s*0\s*\)$/;
  function axisKeys(layout) { return Object.keys(layout).filter((k) => /^[xy]axis\d*$/.test(k)); }

  /* The theme's colours for a layout, as a relayout update ("a.b": value): what layout() sets. */
  function update(layout) {
    const c = colours();
    const u = { paper_bgcolor: c.paper, plot_bgcolor: c.plot, "font.color": c.font, "legend.font.color": c.font,
                "legend.bgcolor": "rgba(0,0,0,0)" };
    axisKeys(layout).forEach((k) => {
      const ax = layout[k] || {};
      if (!TRANSPARENT.test(ax.gridcolor || "")) u[k + ".gridcolor"] = c.grid;  // a heat map's gaps stay see-through
      u[k + ".linecolor"] = c.line;
      u[k + ".zerolinecolor"] = c.line;
    });
    (layout.annotations || []).forEach((a, i) => { u["annotations[" + i + "].font.color"] = c.muted; });
    (layout.updatemenus || []).forEach((m, i) => {
      u["updatemenus[" + i + "].bgcolor"] = c.menu; u["updatemenus[" + i + "].bordercolor"] = c.line;
      u["updatemenus[" + i + "].font.color"] = c.font; u["updatemenus[" + i + "].activecolor"] = c.active;
    });
    return u;
  }

  function setPath(obj, path, value) {
    const parts = path.replace(/\[(\d+)\]/g, ".$1").split(".");
    let o = obj;
    for (let i = 0; i < parts.length - 1; i += 1) {
      if (o[parts[i]] === undefined || o[parts[i]] === null) o[parts[i]] = {};
      o = o[parts[i]];
    }
    o[parts[parts.length - 1]] = value;
  }

  /* Give a figure's layout the theme's colours (in place) and return it: call before Plotly draws it. */
  function layout(l) {
    const u = update(l);
    Object.keys(u).forEach((k) => setPath(l, k, u[k]));
    return l;
  }

  function restyleCharts() {
    if (!window.Plotly) return;
    document.querySelectorAll(".js-plotly-plot").forEach((div) => {
      if (div.layout) window.Plotly.relayout(div, update(div.layout));
    });
  }

  function renderToggle() {
    const btn = document.getElementById("theme-toggle");
    if (!btn) return;
    const dark = document.documentElement.dataset.theme === "dark";
    btn.setAttribute("aria-pressed", String(dark));
    btn.title = (dark ? "Dark" : "Light") + " theme" + (stored() ? " (your choice, remembered)" : " (follows the system)") +
      ": click for " + (dark ? "light" : "dark");
  }

  function apply() {
    const theme = current();
    const changed = document.documentElement.dataset.theme !== theme;
    document.documentElement.dataset.theme = theme;
    renderToggle();
    if (changed) {
      restyleCharts();
      document.dispatchEvent(new CustomEvent("themechange", { detail: { theme: theme } }));
    }
  }

  function set(theme) {
    try {
      if (theme === "dark" || theme === "light") localStorage.setItem(KEY, theme); else localStorage.removeItem(KEY);
    } catch (e) { /* storage refused (private mode): the theme still changes for this page */ }
    apply();
  }
  function toggle() { set(current() === "dark" ? "light" : "dark"); }

  apply();
  if (media) {
    const follow = () => { if (!stored()) apply(); };
    if (media.addEventListener) media.addEventListener("change", follow); else if (media.addListener) media.addListener(follow);
  }
  // another tab changed it
  window.addEventListener("storage", (ev) => { if (ev.key === KEY) apply(); });
  document.addEventListener("DOMContentLoaded", () => {
    renderToggle();
    const btn = document.getElementById("theme-toggle");
    if (btn) btn.addEventListener("click", toggle);
  });
  // charts drawn by scripts that do not call Theme.layout take the theme once the page has loaded
  window.addEventListener("load", restyleCharts);

  window.Theme = { current: current, stored: stored, set: set, toggle: toggle, layout: layout, colours: colours };
})();
