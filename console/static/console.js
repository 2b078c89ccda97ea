// pginbox console: the only script. Every page works without it; it only
// refreshes the live part of a page (the overview) in place, without a full
// reload, and pauses while the tab is hidden. Without JavaScript a <noscript>
// meta refresh reloads the page instead.
"use strict";
(function () {
  var live = document.querySelector("[data-refresh]");
  if (!live || !window.fetch || !window.DOMParser) {
    return;
  }
  var seconds = Number(live.getAttribute("data-refresh"));
  if (!(seconds >= 1)) {
    return;
  }
  var id = live.id;
  var stale = document.getElementById("stale");

  function setStale(on) {
    if (stale) {
      stale.hidden = !on;
    }
  }

  function refresh() {
    if (document.hidden) {
      return;
    }
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store", headers: { Accept: "text/html" } })
      .then(function (res) {
        if (!res.ok) {
          throw new Error("HTTP " + res.status);
        }
        return res.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var next = doc.getElementById(id);
        var cur = document.getElementById(id);
        if (next && cur) {
          cur.replaceWith(document.importNode(next, true));
        }
        setStale(false);
      })
      .catch(function () {
        // Keep the last good numbers, and say they are old.
        setStale(true);
      });
  }
  window.setInterval(refresh, seconds * 1000);
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) {
      refresh();
    }
  });
})();
