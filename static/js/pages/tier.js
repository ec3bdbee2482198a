/* tier.js: a tier page: the tier live, its charts, and its nodes' rows refreshed from the snapshot. */
import { hooks, numText, pctText, start } from "./live-page.js";
import { startTiers } from "./tiers.js";

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

startTiers();
hooks.snapshot.push(updateTierNodes);
start();
