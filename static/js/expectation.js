// The expectation form (promote, edit): the failure fields (class, contract checks, next action)
// apply only when the case expects a failure, so while "succeeds" is chosen they are hidden and
// disabled (a disabled fieldset is not submitted). Without JavaScript every field stays visible.
(function () {
  "use strict";
  function setUp(form) {
    var failure = form.querySelector("[data-expect-failure]");
    var radios = form.querySelectorAll('input[name="outcome"]');
    if (!failure || !radios.length) return;
    function sync() {
      var chosen = form.querySelector('input[name="outcome"]:checked');
      var success = !!chosen && chosen.value === "success";
      failure.hidden = success;
      failure.disabled = success;
    }
    radios.forEach(function (radio) { radio.addEventListener("change", sync); });
    window.addEventListener("pageshow", sync);
    sync();
  }
  function init() { document.querySelectorAll("form").forEach(setUp); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
