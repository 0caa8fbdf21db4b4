// rag-site's additions to the admin's behaviour, kept in a file for the Content-Security-Policy (no inline handlers).
// A field marked data-select-on-click (the new API key) selects its whole text when clicked, ready to copy.
(function () {
  "use strict";
  document.addEventListener("click", (event) => {
    const field = event.target.closest("[data-select-on-click]");
    if (field) field.select();
  });
})();
