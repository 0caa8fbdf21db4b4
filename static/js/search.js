// The search page's keyboard and failure handling (HTMX does the searching).
// "/" focuses the box; arrow keys move through the results; Enter opens one (a plain link).
// A search that fails (a 5xx, the network) replaces the results with a message: never stale results under a new query.
(function () {
  "use strict";

  function results() {
    return Array.from(document.querySelectorAll("#results .hit .open"));
  }

  document.addEventListener("keydown", (event) => {
    const box = document.getElementById("q");
    const typing = event.target.closest("input, textarea, select, [contenteditable]");
    if (event.key === "/" && !typing) {
      event.preventDefault();
      box.focus();
      box.select();
      return;
    }
    if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
    if (typing && event.target !== box) return;
    const links = results();
    if (!links.length) return;
    const at = links.indexOf(document.activeElement);
    let next;
    if (event.key === "ArrowDown") next = at < 0 ? 0 : Math.min(at + 1, links.length - 1);
    else if (at <= 0) { box.focus(); event.preventDefault(); return; }
    else next = at - 1;
    event.preventDefault();
    links[next].focus();
    links[next].closest(".hit").scrollIntoView({ block: "nearest" });
  });

  function failed(message) {
    const section = document.getElementById("results");
    if (!section) return;
    section.innerHTML = "";
    const p = document.createElement("p");
    p.className = "error";
    p.setAttribute("role", "alert");
    p.textContent = message;
    section.appendChild(p);
  }

  // Enter sends the search at once, but the box's "input changed delay:300ms" timer still runs and
  // would send the same search again: its answer then replaced the results under a "Show more" the
  // person had already clicked. The timer's request is dropped when the page already shows its query.
  document.addEventListener("htmx:confirm", (event) => {
    const box = event.target;
    if (box.id !== "q" || !box.form) return;
    const shown = searchOf(new URLSearchParams(window.location.search));
    if (shown === searchOf(new URLSearchParams(new FormData(box.form)))) event.preventDefault();
  });

  // A search's filled-in fields, in one order: the URL and the form name the same search alike.
  function searchOf(params) {
    return Array.from(params.entries())
      .filter(([name, value]) => value !== "" && name !== "page" && name !== "more")
      .map(([name, value]) => `${name}=${value}`)
      .sort()
      .join("&");
  }

  document.addEventListener("htmx:responseError", (event) => {
    const status = event.detail.xhr.status;
    failed(`The search failed (the server answered ${status}). Try again in a moment; if it keeps failing, tell an admin.`);
  });
  document.addEventListener("htmx:sendError", () => {
    failed("The search could not reach the server (network error). Check your connection and try again.");
  });
})();
