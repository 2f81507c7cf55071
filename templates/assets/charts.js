/* Draw each chart from its embedded Plotly JSON (built in Python) when it comes near the viewport.
   The Plotly bundle (the script tag's data-plotly) is fetched only then, once. Until a chart is
   drawn its numbers table stays open in its place (that is also the page without JavaScript);
   once drawn, the table collapses under the chart. If the bundle cannot load, the tables stay. */
(function () {
  "use strict";
  var tag = document.currentScript;
  var bundle = tag && tag.getAttribute("data-plotly");
  var loading = null;
  var CONFIG = {
    responsive: true,
    displaylogo: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"]
  };

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
    if (width >= 560) { return figure; }
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
    plotly().then(function (Plotly) {
      var figure = narrow(JSON.parse(source.textContent), node.parentNode.clientWidth);
      node.hidden = false;
      return Plotly.newPlot(node, figure.data, figure.layout, CONFIG);
    }).then(function () {
      node.setAttribute("data-state", "drawn");
      var table = node.parentNode.querySelector("details.chart-table");
      if (table) { table.open = false; }
    }, function () {
      node.hidden = true;
      node.setAttribute("data-state", "failed");
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
