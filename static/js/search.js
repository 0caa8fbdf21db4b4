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

  document.addEventListener("htmx:responseError", (event) => {
    const status = event.detail.xhr.status;
    failed(`The search failed (the server answered ${status}). Try again in a moment; if it keeps failing, tell an admin.`);
  });
  document.addEventListener("htmx:sendError", () => {
    failed("The search could not reach the server (network error). Check your connection and try again.");
  });
})();
