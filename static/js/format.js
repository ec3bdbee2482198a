/* format.js: one way to print a figure on every page and chart, as the server's |num filter does
 * (apps/common/templatetags/numbers.py): the browser's locale; no decimals from 100, one from 10,
 * two from 1, three significant digits below 1; "–" for a figure not known. */
const formats = new Map();

function formatter(key, options) {
  if (!formats.has(key)) formats.set(key, new Intl.NumberFormat(undefined, options));
  return formats.get(key);
}

export function known(v) {
  return v !== null && v !== undefined && v !== "" && typeof v !== "boolean" && Number.isFinite(Number(v));
}

// A number as text, with its unit after a space when given.
export function num(v, unit) {
  if (!known(v)) return "–";
  const n = Number(v), a = Math.abs(n);
  let text;
  if (a >= 100 || Number.isInteger(n)) text = formatter("0", { maximumFractionDigits: 0 }).format(n);
  else if (a >= 1) text = formatter(a >= 10 ? "1" : "2", { maximumFractionDigits: a >= 10 ? 1 : 2 }).format(n);
  else text = formatter("s3", { maximumSignificantDigits: 3 }).format(n);
  return unit ? text + " " + unit : text;
}

// A fraction (0.42) as a whole percentage in the browser's locale.
export function pct(v) {
  return known(v) ? formatter("%", { style: "percent", maximumFractionDigits: 0 }).format(Number(v)) : "–";
}

// Plotly's d3 format for an axis or hover of figures this size (the same precision rule).
export function axisFormat(max) {
  const a = Math.abs(max || 0);
  return a >= 100 ? ",.0f" : a >= 10 ? ",.1~f" : a >= 1 ? ",.2~f" : ",.3~r";
}
