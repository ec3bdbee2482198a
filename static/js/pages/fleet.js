/* fleet.js: the fleet page ("/"): the tiers live, the fleet's charts and its events. */
import { start } from "./live-page.js";
import { startTiers } from "./tiers.js";

startTiers();
start();
