/* charts.js: every Plotly chart of the pages is drawn here, so each takes the page's light/dark
 * theme (theme.js's Theme.layout) and the same controls; figures come built from Python or, for
 * the rollout's cohort chart, from the page's module.
 *
 * draw(div, fig, config): draw or redraw in place (Plotly.react); a figure's height becomes the
 * container's, and a container grows when legend rows leave the plot area under MIN_PLOT. */

export const LIVE_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
export const STATIC_CONFIG = { displayModeBar: false, responsive: true };

export function themed(layout) { return window.Theme ? window.Theme.layout(layout) : layout; }

let revision = 0;

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

/* A figure from the server into ``div`` (an element or its id), themed, holding its shape. */
export function draw(div, fig, config) {
  if (typeof div === "string") div = document.getElementById(div);
  if (!div || !fig || !window.Plotly) return Promise.resolve();
  if (fig.layout.height) {
    div.style.height = Math.max(fig.layout.height, parseFloat(div.style.height) || 0) + "px";
    delete fig.layout.height;
  }
  fig.layout.datarevision = ++revision;
  return firstReact(div, fig.data, themed(fig.layout), config || LIVE_CONFIG).then(() => {
    if (!div.__shape) { div.__shape = true; div.on("plotly_afterplot", () => fitPlot(div)); }
    fitPlot(div);
  });
}

/* Plotly.react, except that a chart's first drawing leaves its button menus (the latency chart's
 * p50/p95/p99) to a relayout after it: drawn at once, the menus push the top margin out in the
 * middle of the first layout and Plotly writes its axis lines with NaN coordinates ("MNaN" errors
 * in the console on every first load). */
function firstReact(div, data, layout, config) {
  const { updatemenus, ...rest } = layout;
  if (div._fullLayout || !updatemenus) return Plotly.react(div, data, layout, config);
  return Plotly.react(div, data, rest, config).then(() => Plotly.relayout(div, { updatemenus }));
}

/* Redraw a chart whose traces were changed in place (live tails, recoloured cells). */
export function redraw(div) {
  div.layout.datarevision = ++revision;
  return Plotly.react(div, div.data, div.layout, LIVE_CONFIG);
}

/* A chart drawn once and swapped whole (no mode bar unless config says), themed: the vector, planner and cohort charts. */
export function plot(div, fig, config) {
  if (typeof div === "string") div = document.getElementById(div);
  if (!div || !fig || !window.Plotly) return Promise.resolve();
  return firstReact(div, fig.data, themed(fig.layout), config || STATIC_CONFIG);
}
