/* Draw each chart from its embedded Plotly JSON (built in Python) when it comes near the viewport.
   The Plotly bundle (the script tag's data-plotly) is fetched only then, once. Until a chart is
   drawn its numbers table stays open in its place (that is also the page without JavaScript);
   once drawn, the table collapses under the chart. If the bundle cannot load, the tables stay.

   Parsing and running the 1.2 MB bundle takes longer than a reader should wait for a first
   picture, so as soon as the document is parsed every chart gets a static preview: the same
   figure (axes, lines, error bars, hollow withheld markers, legend) drawn as plain SVG by
   `preview` below, in a few milliseconds. Plotly replaces it when it has drawn (hover, zoom). */
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
    figure.layout.margin = { l: 48, r: 8, t: 16, b: 80 };
    figure.layout.font = Object.assign({}, figure.layout.font, { size: 11 });
    figure.data.forEach(function (trace) {
      if (trace.mode === "markers+text") { trace.mode = "markers"; }
    });
    return figure;
  }

  /* ---- the static preview ---- */
  var SVG = "http://www.w3.org/2000/svg";
  var PREVIEW_HEIGHT = 300;

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (parent) { parent.appendChild(node); }
    return node;
  }

  function plain(label) {
    /* Plotly's label text (entities escaped in Python, <br> between legend lines) as plain text;
       DOMParser only parses, it never runs anything. */
    var html = String(label === undefined || label === null ? "" : label).replace(/<br>/g, " ");
    return new DOMParser().parseFromString(html, "text/html").body.textContent;
  }

  function niceTicks(top) {
    var raw = top / 5;
    var power = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * power; }).filter(function (s) { return s >= raw; })[0];
    var ticks = [];
    for (var v = 0; v <= top + step / 1000; v += step) { ticks.push(Math.round(v * 1e6) / 1e6); }
    return ticks;
  }

  function preview(node, figure, width) {
    var layout = figure.layout, xaxis = layout.xaxis || {}, yaxis = layout.yaxis || {};
    var narrowScreen = width < 560;
    var m = narrowScreen ? { l: 48, r: 8, t: 12, b: 44 } : { l: 60, r: 20, t: 16, b: 48 };
    var log = xaxis.type === "log";
    var fx = function (v) { return log ? Math.log10(v) : v; };
    var xs = [], tops = [];
    figure.data.forEach(function (trace) {
      trace.x.forEach(function (x, i) {
        xs.push(fx(x));
        var plus = trace.error_y && trace.error_y.array ? trace.error_y.array[i] : 0;
        tops.push(trace.y[i] + (plus || 0));
      });
    });
    (xaxis.tickvals || []).forEach(function (v) { xs.push(fx(v)); });
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    var pad = (x1 - x0) * 0.06 || 0.5;
    x0 -= pad; x1 += pad;
    var yTicks = niceTicks(Math.max.apply(null, tops.concat([1])) * 1.05);
    var y1 = yTicks[yTicks.length - 1];
    var plotW = width - m.l - m.r, plotH = PREVIEW_HEIGHT - m.t - m.b;
    var px = function (v) { return m.l + (fx(v) - x0) / (x1 - x0) * plotW; };
    var py = function (v) { return m.t + plotH - v / y1 * plotH; };
    var font = narrowScreen ? 11 : 13;

    var box = document.createElement("div");
    box.className = "chart-preview";
    var svg = el("svg", { width: width, height: PREVIEW_HEIGHT, viewBox: "0 0 " + width + " " + PREVIEW_HEIGHT,
      role: "img", "aria-label": node.getAttribute("aria-label") || "", "font-size": font }, box);
    el("rect", { x: m.l, y: m.t, width: plotW, height: plotH, fill: "#ffffff" }, svg);
    yTicks.forEach(function (v) {
      el("line", { x1: m.l, x2: m.l + plotW, y1: py(v), y2: py(v), stroke: "#e5e7eb" }, svg);
      el("text", { x: m.l - 6, y: py(v) + 4, "text-anchor": "end", fill: "#1f2937" }, svg).textContent = String(v);
    });
    (xaxis.tickvals || []).forEach(function (v, i) {
      el("line", { x1: px(v), x2: px(v), y1: m.t, y2: m.t + plotH, stroke: "#e5e7eb" }, svg);
      el("text", { x: px(v), y: m.t + plotH + font + 4, "text-anchor": "middle", fill: "#1f2937", "class": "xtick" }, svg)
        .textContent = plain((xaxis.ticktext || [])[i] || v);
    });
    el("text", { x: m.l + plotW / 2, y: PREVIEW_HEIGHT - 6, "text-anchor": "middle", fill: "#1f2937" }, svg)
      .textContent = plain(xaxis.title && xaxis.title.text);
    el("text", { x: 0, y: 0, "text-anchor": "middle", fill: "#1f2937",
      transform: "translate(" + (font + 1) + "," + (m.t + plotH / 2) + ") rotate(-90)" }, svg)
      .textContent = plain(yaxis.title && yaxis.title.text);

    var legend = document.createElement("ul");
    legend.className = "chart-legend";
    figure.data.forEach(function (trace) {
      var colour = (trace.marker && trace.marker.color) || "#1f2937";
      var hollow = trace.marker && trace.marker.symbol === "circle-open";
      var points = trace.x.map(function (x, i) { return [px(x), py(trace.y[i]), i]; });
      if (trace.mode && trace.mode.indexOf("lines") !== -1 && points.length > 1) {
        el("polyline", { points: points.map(function (p) { return p[0] + "," + p[1]; }).join(" "),
          fill: "none", stroke: colour, "stroke-width": 2 }, svg);
      }
      points.forEach(function (p) {
        var err = trace.error_y;
        if (err && err.array) {
          var top = py(trace.y[p[2]] + (err.array[p[2]] || 0));
          var bottom = py(trace.y[p[2]] - ((err.arrayminus || err.array)[p[2]] || 0));
          el("path", { d: "M" + p[0] + "," + top + "V" + bottom + "M" + (p[0] - 4) + "," + top + "h8M" + (p[0] - 4) + "," + bottom + "h8",
            stroke: colour, "stroke-width": 1.5 }, svg);
        }
        el("circle", { cx: p[0], cy: p[1], r: hollow ? 5 : 4, fill: hollow ? "#ffffff" : colour,
          stroke: colour, "stroke-width": 2, "class": "mark" }, svg);
        if (trace.text && !narrowScreen) {
          el("text", { x: p[0], y: p[1] - 10, "text-anchor": "middle", fill: colour, "font-size": 11 }, svg)
            .textContent = plain(trace.text[p[2]]);
        }
      });
      var item = document.createElement("li");
      var swatch = el("svg", { width: 14, height: 14, "aria-hidden": "true" }, item);
      el("circle", { cx: 7, cy: 7, r: 5, fill: hollow ? "#ffffff" : colour, stroke: colour, "stroke-width": 2 }, swatch);
      item.appendChild(document.createTextNode(plain(trace.name)));
      legend.appendChild(item);
    });
    box.appendChild(legend);
    return box;
  }

  function sketch(node) {
    var source = document.getElementById("chart-data-" + node.getAttribute("data-chart"));
    if (!source) { return; }
    try {
      var figure = JSON.parse(source.textContent);
      node.parentNode.insertBefore(preview(node, figure, node.parentNode.clientWidth), node);
    } catch (e) { /* no preview: the table stays, Plotly may still draw */ }
  }

  function draw(node) {
    var source = document.getElementById("chart-data-" + node.getAttribute("data-chart"));
    if (!source || node.getAttribute("data-state")) { return; }
    node.setAttribute("data-state", "loading");
    plotly().then(function (Plotly) {
      var figure = narrow(JSON.parse(source.textContent), node.parentNode.clientWidth);
      var sketched = node.parentNode.querySelector(".chart-preview");
      if (sketched) { sketched.parentNode.removeChild(sketched); }
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
    nodes.forEach(sketch);
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
