/* keys.js: keyboard shortcuts on every page (listed in the top bar's title and docs/dashboard.md).
 *   /      search the nodes (the search box of the page, or the node list's)
 *   g n    nodes · g f fleet · g o operations · g r racks · g v versions · g a audit
 *   d      drain the node in view: opens the usual confirmation (reason required)
 * Keys typed into a field (not one of a dialog just closed), with a modifier, or while a dialog is
 * open are left alone. After "g" the next key decides (a page, or nothing): no time window, so a
 * slow machine never loses the jump. */
(function () {
  "use strict";
  const GO = { n: "/nodes/", f: "/", o: "/operations/", r: "/racks/", v: "/combinations/", a: "/audit/" };
  let pendingG = false;

  // A field of a closed dialog keeps the focus until the browser's next rendering update: keys
  // pressed before it are not typing.
  function typing(el) {
    if (!el || (el.closest && el.closest("dialog:not([open])"))) return false;
    return el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName);
  }

  function search() {
    const box = document.querySelector('input[type="search"]');
    if (box) { box.focus(); box.select(); return; }
    location.href = "/nodes/#search";
  }

  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target) || document.querySelector("dialog[open]")) return;
    if (pendingG && GO[ev.key]) {
      pendingG = false; ev.preventDefault(); location.href = GO[ev.key]; return;
    }
    if (["Shift", "CapsLock"].includes(ev.key)) return;
    pendingG = ev.key === "g" && !pendingG;
    if (pendingG) return;
    if (ev.key === "/") { ev.preventDefault(); search(); return; }
    if (ev.key === "d") {
      const drain = document.querySelector('#node-actions button[data-action="drain"]');
      if (drain && !drain.disabled) { ev.preventDefault(); drain.click(); }
    }
  });

  if (location.hash === "#search") {
    const box = document.querySelector('input[type="search"]');
    if (box) box.focus();
  }
})();
