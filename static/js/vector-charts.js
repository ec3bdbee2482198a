/* vector-charts.js: the /versions/ page's charts, from the figures the server put in #vector-charts. */
(function () {
  "use strict";
  const data = document.getElementById("vector-charts");
  if (!data || !window.Plotly) return;
  const figures = JSON.parse(data.textContent);
  const themed = (l) => (window.Theme ? window.Theme.layout(l) : l);  // theme.js: the page's light/dark colours
  for (const [id, fig] of Object.entries(figures)) {
    const el = document.getElementById(id);
    if (el) window.Plotly.newPlot(el, fig.data, themed(fig.layout), { displayModeBar: false, responsive: true });
  }
})();
