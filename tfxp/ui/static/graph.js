// Pan and zoom for the console's SVG graphs (no library): the viewBox moves.
// Clicking a box follows its link (the <a> around it); a drag does not.
(function () {
  "use strict";
  function setup(svg) {
    var full = {x: 0, y: 0, w: +svg.dataset.width, h: +svg.dataset.height};
    // As tall as the graph (within reason); a graph much wider than the page starts
    // at its own size from the left (pan to see the rest), not shrunk to fit.
    svg.style.height = Math.min(Math.max(full.h, 200), 640) + "px";
    var box = svg.getBoundingClientRect();
    var natural = {x: 0, y: 0, w: box.width, h: box.height};
    var start = full.w > box.width * 1.4 ? natural : full;
    var view = Object.assign({}, start);
    var dragging = null, moved = false;
    apply();
    function apply() { svg.setAttribute("viewBox", [view.x, view.y, view.w, view.h].join(" ")); }
    function zoom(factor, cx, cy) {
      var r = svg.getBoundingClientRect();
      var px = view.x + (cx === undefined ? 0.5 : (cx - r.left) / r.width) * view.w;
      var py = view.y + (cy === undefined ? 0.5 : (cy - r.top) / r.height) * view.h;
      view.w *= factor; view.h *= factor;
      view.x = px - (px - view.x) * factor; view.y = py - (py - view.y) * factor;
      apply();
    }
    svg.addEventListener("wheel", function (e) {
      e.preventDefault();
      zoom(e.deltaY > 0 ? 1.15 : 1 / 1.15, e.clientX, e.clientY);
    }, {passive: false});
    svg.addEventListener("pointerdown", function (e) {
      dragging = {x: e.clientX, y: e.clientY, vx: view.x, vy: view.y}; moved = false;
    });
    window.addEventListener("pointermove", function (e) {
      if (!dragging) return;
      var r = svg.getBoundingClientRect();
      var dx = (e.clientX - dragging.x) * view.w / r.width, dy = (e.clientY - dragging.y) * view.h / r.height;
      if (Math.abs(e.clientX - dragging.x) + Math.abs(e.clientY - dragging.y) > 4) moved = true;
      view.x = dragging.vx - dx; view.y = dragging.vy - dy; apply();
    });
    window.addEventListener("pointerup", function () { dragging = null; });
    svg.addEventListener("click", function (e) { if (moved) { e.preventDefault(); moved = false; } }, true);
    var tools = svg.parentNode.querySelector(".graph-tools");
    if (tools) tools.addEventListener("click", function (e) {
      var what = e.target.dataset && e.target.dataset.zoom;
      if (what === "in") zoom(1 / 1.25);
      else if (what === "out") zoom(1.25);
      else if (what === "reset") { view = Object.assign({}, full); apply(); }
      else if (what === "actual") { view = Object.assign({}, natural); apply(); }
    });
  }
  document.querySelectorAll("svg.graph").forEach(setup);
})();
