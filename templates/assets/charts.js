/* Draw every chart on the page from its embedded Plotly JSON (built in Python). */
(function () {
  "use strict";
  function draw() {
    if (!window.Plotly) { return; }
    var nodes = document.querySelectorAll("[data-chart]");
    Array.prototype.forEach.call(nodes, function (node) {
      var source = document.getElementById("chart-data-" + node.getAttribute("data-chart"));
      if (!source) { return; }
      var figure = JSON.parse(source.textContent);
      node.textContent = "";
      window.Plotly.newPlot(node, figure.data, figure.layout, {
        responsive: true,
        displaylogo: false,
        modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"]
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
