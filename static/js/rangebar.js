// The range bar: show the From / To fields only for a custom range, and leave them out of the
// URL otherwise (a preset ignores them); leave unset filters out of the URL too. Without
// JavaScript every field stays visible and the form still works.
(function () {
  "use strict";
  function setUp(form) {
    var select = form.querySelector("[data-custom-toggle]");
    var custom = form.querySelector("[data-custom-range]");
    if (!select || !custom) return;
    function sync() {
      var on = select.value === "custom";
      custom.hidden = !on;
      custom.querySelectorAll("input").forEach(function (input) { input.disabled = !on; });
    }
    select.addEventListener("change", function () {
      sync();
      if (select.value === "custom") {
        var first = custom.querySelector("input");
        if (first) first.focus();
      }
    });
    sync();
    // Keep the URL short: "all" (an empty filter) is the default anyway.
    form.addEventListener("submit", function () {
      form.querySelectorAll("select").forEach(function (select) {
        if (select.value === "") select.disabled = true;
      });
    });
    // Coming back with the Back button restores this page as it was left: usable again.
    window.addEventListener("pageshow", function () {
      form.querySelectorAll("select").forEach(function (select) { select.disabled = false; });
      sync();
    });
  }
  function init() { document.querySelectorAll("form.rangebar").forEach(setUp); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
