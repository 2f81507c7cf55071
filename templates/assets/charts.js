/* Draw each chart from its embedded Plotly JSON (built in Python) when it comes near the viewport.
   The Plotly bundle (the script tag's data-plotly) is fetched only then, once. Until a chart is
   drawn its numbers table stays open in the chart's place (without JavaScript the table stands
   whole); the page holds the height the chart draws at (style.css), and the chart takes the
   table's place in one step, the table collapsing above it, so nothing else on the page moves.
   If the bundle cannot load, the tables stay. */
(function () {
  "use strict";
  var tag = document.currentScript;
  var bundle = tag && tag.getAttribute("data-plotly");
  var loading = null;
  var PHONE_WIDTH = 560;  // narrower than this, a chart is drawn for a phone (narrow)
  var CONFIG = {
    responsive: true,
    displaylogo: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"]
  };
  // On a phone the toolbar, shown at a tap, would cover the top of the plot: it is left out there
  var PHONE_CONFIG = Object.assign({}, CONFIG, { displayModeBar: false });
  // style.css holds each chart's height only where the browser tells scripts from none
  var RESERVED = !!(window.matchMedia && window.matchMedia("(scripting: enabled)").matches);

  function plotly() {
    if (window.Plotly) { return Promise.resolve(window.Plotly); }
    if (!loading) {
      loading = new Promise(function (resolve, reject) {
        var script = document.createElement("script");
        script.src = bundle;
        script.async = true;
        script.onload = function () {
          if (window.Plotly) { resolve(window.Plotly); } else { reject(new Error("no Plotly in " + bundle)); }
        };
        script.onerror = function () { loading = null; reject(new Error("could not load " + bundle)); };
        document.head.appendChild(script);
      });
    }
    return loading;
  }

  function narrow(figure, width) {
    // A phone: less margin, smaller type, and withheld markers without their text label (the
    // legend names them), so no label is clipped or overlaps at 390 px.
    if (width >= PHONE_WIDTH) { return figure; }
    if (figure.layout.meta && figure.layout.meta.phone_height) { figure.layout.height = figure.layout.meta.phone_height; }
    figure.layout.margin = { l: 48, r: 8, t: 16, b: 80 };
    figure.layout.font = Object.assign({}, figure.layout.font, { size: 11 });
    figure.data.forEach(function (trace) {
      if (trace.mode === "markers+text") { trace.mode = "markers"; }
    });
    return figure;
  }

  function draw(node) {
    var source = document.getElementById("chart-data-" + node.getAttribute("data-chart"));
    if (!source || node.getAttribute("data-state")) { return; }
    node.setAttribute("data-state", "loading");
    var table = node.parentNode.querySelector("details.chart-table");
    plotly().then(function (Plotly) {
      var figure = JSON.parse(source.textContent);
      if (table) { table.open = false; }
      node.hidden = false;
      var width = node.clientWidth;
      figure = narrow(figure, width);
      if (RESERVED && node.clientHeight) { figure.layout.height = node.clientHeight; }  // the height the page held for it
      return Plotly.newPlot(node, figure.data, figure.layout, width >= PHONE_WIDTH ? CONFIG : PHONE_CONFIG);
    }).then(function () {
      node.setAttribute("data-state", "drawn");
    }, function () {
      node.hidden = true;
      node.setAttribute("data-state", "failed");
      if (table) { table.open = true; }
    });
  }

  function start() {
    var nodes = Array.prototype.slice.call(document.querySelectorAll("[data-chart]"));
    if (!nodes.length || !bundle) { return; }
    if (!("IntersectionObserver" in window)) { nodes.forEach(draw); return; }
    var observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (!entry.isIntersecting) { return; }
        observer.unobserve(entry.target);
        draw(entry.target.querySelector("[data-chart]"));
      });
    }, { rootMargin: "300px 0px" });
    nodes.forEach(function (node) { observer.observe(node.parentNode); });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
