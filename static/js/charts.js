// Draws every chart on the page: <div data-figure="ID"> with its figure in <script id="ID" type="application/json">
// (Django's json_script). No inline scripts; figure strings are escaped on the server (dashboard/charts/).
(function () {
  "use strict";
  var config = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
  function draw(el) {
    var source = document.getElementById(el.getAttribute("data-figure"));
    if (!source || !window.Plotly) return;
    var figure = JSON.parse(source.textContent);
    var options = Object.assign({}, config, el.hasAttribute("data-static") ? { staticPlot: true } : {}, figure.config || {});
    window.Plotly.newPlot(el, figure.data || [], figure.layout || {}, options);
    el.setAttribute("data-drawn", "1");
  }
  function drawAll() {
    document.querySelectorAll("[data-figure]").forEach(draw);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", drawAll);
  else drawAll();
})();
