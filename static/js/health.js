/* health.js: the /health/ page. A finding opened, escalated or resolved anywhere reloads the list
 * (not while you type a reason). */
(function () {
  "use strict";
  var scheme = location.protocol === "https:" ? "wss://" : "ws://";
  var pending = null;
  function connect() {
    var ws = new WebSocket(scheme + location.host + "/ws/fleet/");
    ws.onmessage = function (e) {
      var msg = JSON.parse(e.data);
      if (msg.type !== "health.finding" || pending) return;
      pending = setInterval(function () {
        var el = document.activeElement;
        if (el && (el.tagName === "INPUT" || el.tagName === "SELECT") && el.value) return;
        location.reload();
      }, 1000);
    };
    ws.onclose = function () { setTimeout(connect, 3000); };
  }
  connect();
})();
