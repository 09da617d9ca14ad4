// Table rows that lead somewhere: <tr class="rowlink" data-href="…">. A click anywhere on the row
// (not on a link or button inside it, not while selecting text) follows it; a middle or
// Ctrl/Cmd-click opens it in a new tab. The row's own links stay the keyboard's way in.
(function () {
  "use strict";
  function onClick(event) {
    var row = event.target.closest("tr.rowlink[data-href]");
    if (!row || event.target.closest("a, button, input, select, summary")) return;
    if (window.getSelection && String(window.getSelection()).length) return;
    var href = row.getAttribute("data-href");
    if (!href || href.charAt(0) !== "/") return; // same-origin paths only
    if (event.button === 1 || event.ctrlKey || event.metaKey) window.open(href, "_blank", "noopener");
    else window.location.assign(href);
  }
  document.addEventListener("click", onClick);
  document.addEventListener("auxclick", function (event) { if (event.button === 1) onClick(event); });
})();
