/* operations.js: the operations page: holds, quarantines, scale requests and decisions, re-read as
 * the server renders them when the fleet's events say they changed, and every 5 s (what a drain
 * waits for moves on without an event); operators release holds and quarantines from it. */
import { hooks, reread, start, warn } from "./live-page.js";

const refresh = () => reread("ops-live");
hooks.message.push((msg) => { if (msg.type === "node.state" || msg.type === "audit.event") warn(refresh()); });
hooks.resync.push((again) => (again ? refresh() : null));
hooks.action.push(() => warn(refresh()));
start();
setInterval(() => warn(refresh()), 5000);
