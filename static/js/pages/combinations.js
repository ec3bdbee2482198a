/* combinations.js: the version combinations page: validate, pin or block one (admins), the list
 * re-read as the server renders it after each. */
import { hooks, reread, start, warn } from "./live-page.js";

hooks.action.push(() => warn(reread("combos")));
start();
