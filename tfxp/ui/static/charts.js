// Draws every chart whose plotly figure the page carries as JSON data (never as code).
(function () {
  "use strict";
  if (typeof Plotly === "undefined") return;
  document.querySelectorAll("script.chart-spec").forEach(function (spec) {
    var figure = JSON.parse(spec.textContent);
    var target = spec.previousElementSibling;
    Plotly.newPlot(target, figure.data, figure.layout, {displayModeBar: false, responsive: true});
  });
})();
