// The viewer's line marks: #L12 or #L12-L20 marks those lines and scrolls them into view;
// clicking a line number marks it (shift-click extends the range); "Copy citation" copies the range's citation
// as every surface writes it (kernel/citations.py): path:12-20, or for a document its pages first,
// "report.pdf p. 3 (lines 9-10)".
(function () {
  "use strict";
  const viewer = document.getElementById("viewer");
  const output = document.getElementById("citation");
  if (!viewer || !output) return;

  function range() {
    const match = /^#L(\d+)(?:-L?(\d+))?$/.exec(window.location.hash);
    if (!match) return null;
    const start = Number(match[1]);
    const end = Math.max(start, Number(match[2] || match[1]));
    return { start, end };
  }

  // [label, first line, last line] of each page, slide or sheet; absent for a text file.
  const pages = output.dataset.pages ? JSON.parse(output.dataset.pages) : [];

  // kernel/citations.py's pages_label and citation_text: one format on every surface.
  function citation(lines) {
    const path = output.dataset.cite;
    if (!lines) return path;
    const labels = pages.filter(([, first, last]) => first <= lines.end && last >= lines.start).map(([label]) => label);
    let anchor = labels.join("");
    if (labels.length > 1) {
      anchor = labels.every((label) => label.startsWith("p. "))
        ? `p. ${labels[0].slice(3)}-${labels[labels.length - 1].slice(3)}`
        : labels.join(", ");
    }
    return anchor ? `${path} ${anchor} (lines ${lines.start}-${lines.end})` : `${path}:${lines.start}-${lines.end}`;
  }

  function mark() {
    viewer.querySelectorAll(".marked").forEach((line) => line.classList.remove("marked"));
    const lines = range();
    output.textContent = citation(lines);
    if (!lines) return;
    let first = null;
    for (let n = lines.start; n <= lines.end; n += 1) {
      const line = document.getElementById(`L-${n}`);
      if (line) {
        line.classList.add("marked");
        first = first || line;
      }
    }
    if (first) first.scrollIntoView({ block: "center" });
  }

  viewer.addEventListener("click", (event) => {
    const number = event.target.closest(".linenos");
    if (!number) return;
    const n = Number(number.textContent.trim());
    const current = range();
    const hash = event.shiftKey && current ? `#L${Math.min(current.start, n)}-L${Math.max(current.start, n)}` : `#L${n}`;
    history.replaceState(null, "", hash);
    mark();
  });

  document.getElementById("copy-citation").addEventListener("click", async () => {
    const status = document.getElementById("copied");
    try {
      await navigator.clipboard.writeText(output.textContent);
      status.textContent = "Copied.";
    } catch (error) {
      status.textContent = "Select the citation and copy it (the browser refused the clipboard).";
    }
  });

  window.addEventListener("hashchange", mark);
  mark();
})();
