// Draws every chart on the page: <div data-figure="ID"> with its figure in <script id="ID" type="application/json">
// (Django's json_script), in place of the static SVG preview the server put in the div. No inline scripts; figure
// strings are escaped on the server (dashboard/charts/).
// The charts on the first screen are drawn at once, the others one per idle moment after it has painted: a newPlot
// holds the main thread for 60-800 ms, and the tool page's three charts below the fold held back the three on
// screen (docs/benchmarks.md#chart-page-first-load). Chart boxes have their height in the CSS, so nothing moves.
(function () {
  "use strict";
  var config = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
  var idle = window.requestIdleCallback || function (callback) { return window.setTimeout(callback, 1); };
  function draw(el) {
    var source = document.getElementById(el.getAttribute("data-figure"));
    if (!source || !window.Plotly) return;
    var figure = JSON.parse(source.textContent);
    var options = Object.assign({}, config, el.hasAttribute("data-static") ? { staticPlot: true } : {}, figure.config || {});
    // The server's static preview (dashboard/charts/preview.py) leaves in the same task as the draw, so no frame
    // shows the box empty; if plotly.js never runs, it stays.
    var preview = el.querySelector(":scope > .chart-preview");
    if (preview) preview.remove();
    window.Plotly.newPlot(el, figure.data || [], figure.layout || {}, options);
    el.setAttribute("data-drawn", "1");
  }
  function onScreen(el) {
    var box = el.getBoundingClientRect();
    return box.bottom > 0 && box.top < window.innerHeight;
  }
  function drawAll() {
    var charts = Array.prototype.slice.call(document.querySelectorAll("[data-figure]"));
    var now = [], later = [];
    charts.forEach(function (el) { (onScreen(el) ? now : later).push(el); });  // all measured before any draw
    now.forEach(draw);
    (function next() {
      if (!later.length) return;
      idle(function () { draw(later.shift()); next(); }, { timeout: 500 });
    })();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", drawAll);
  else drawAll();
})();
