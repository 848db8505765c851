// The queue dashboard refreshes itself: every few seconds it asks dashboard/data/ (the same
// view permission as the page) and puts the HTML it answers in place of the changing part.
// No refresh while the tab is hidden; one as soon as it is shown again.
(function () {
  "use strict";
  var box = document.getElementById("sq-live");
  var stamp = document.getElementById("sq-updated");
  if (!box || !window.fetch) {
    return;
  }
  var every = 1000 * parseFloat(box.dataset.refreshSeconds || "5");
  var busy = false;

  function refresh() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    fetch(box.dataset.refreshUrl, {
      credentials: "same-origin",
      headers: {"Accept": "application/json"},
      cache: "no-store"
    }).then(function (response) {
      if (!response.ok) {
        throw new Error("HTTP " + response.status);
      }
      return response.json();
    }).then(function (data) {
      box.innerHTML = data.html;
      // The server's words for the time, as the page has them: not the browser's format.
      stamp.textContent = "Updated " + data.updated +
        "; refreshes every " + every / 1000 + " s.";
      stamp.classList.remove("sq-stale");
      box.dispatchEvent(new CustomEvent("sq:refreshed", {detail: data.snapshot}));
    }).catch(function (error) {
      // Not logged in any more answers the login page, which is not JSON.
      stamp.textContent = "Could not refresh (" + error.message + "): showing older figures; " +
        "trying again in " + every / 1000 + " s. Reload the page if this lasts.";
      stamp.classList.add("sq-stale");
    }).then(function () {
      busy = false;
    });
  }

  setInterval(refresh, every);
  document.addEventListener("visibilitychange", refresh);
})();
