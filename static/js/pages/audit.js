/* audit.js: the audit log: a new record re-reads the rows as the server renders them. */
import { hooks, reread, start, warn } from "./live-page.js";

const refresh = () => reread("audit-rows");
hooks.message.push((msg) => { if (msg.type === "audit.event") warn(refresh()); });
hooks.resync.push((again) => (again ? refresh() : null));
start();
