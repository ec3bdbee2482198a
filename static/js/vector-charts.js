/* vector-charts.js: the /versions/ page's charts, from the figures the server put in #vector-charts. */
import { plot } from "./charts.js";

const data = document.getElementById("vector-charts");
if (data) {
  for (const [id, fig] of Object.entries(JSON.parse(data.textContent))) plot(id, fig);
}
