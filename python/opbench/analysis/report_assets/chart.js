/* opbench-chart 1.2.0: history charts drawn as SVG from the JSON embedded in the page.
 * Hand-written for opbench's report (no dependency, nothing fetched). Each
 * <div class="chart" data-series="ID"> gets one <svg class="chart-svg">: a point per
 * run (its figure, the 10th percentile) with its interval, the fitted levels, steps as
 * vertical lines at the first commit after them (class "step", data-commit), titled
 * with what holds them ("z=9.6 with 9 paired rounds"), drifts
 * shaded, changes within the noise as faint lines (class "minor-step") titled so, commits
 * labelled by tag where they have one, and a tooltip that follows the mouse with the
 * nearest run's commit, tag and environment. A run left out of its commit's level (its
 * core ran slower than the machine's full speed) is a hollow point (class "left-out"),
 * without its interval; the scale is the counted runs', and a left-out run beyond it
 * sits on the chart's edge (class "clipped"), its value in the tooltip.
 */
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var W = 760, H = 260, L = 70, R = 16, T = 14, B = 40;

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(e);
    return e;
  }

  function percent(size) {  // as the text writes a change: "+15.0%"
    return (size > 0 ? "+" : "") + (size * 100).toFixed(1) + "%";
  }

  function ticks(lo, hi, n) {
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n || 1)));
    [1, 2, 5, 10].some(function (m) { if ((hi - lo) / (step * m) <= n) { step *= m; return true; } return false; });
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
    return out;
  }

  function draw(div, s) {
    var pts = s.points;
    // Scales with its column (machines side by side share the width); the drawing
    // is in viewBox units.
    var svg = el("svg", {"class": "chart-svg", viewBox: "0 0 " + W + " " + H, width: "100%",
                         role: "img", "aria-label": s.title}, div);
    if (!pts.length) return;
    var nx = s.commits.length;
    // Scaled to the runs that count: a run another tenant slowed 2x would squash the steps.
    var counted = pts.filter(function (p) { return !p.left_out; });
    var lo = Math.min.apply(null, counted.map(function (p) { return p.low; }));
    var hi = Math.max.apply(null, counted.map(function (p) { return p.high; }));
    var pad = (hi - lo) * 0.08 || hi * 0.01 || 1; lo -= pad; hi += pad;
    var x = function (i) { return L + (nx > 1 ? i * (W - L - R) / (nx - 1) : (W - L - R) / 2); };
    var y = function (v) { return T + (hi - v) * (H - T - B) / (hi - lo); };
    var axes = el("g", {"class": "axes"}, svg);
    ticks(lo, hi, 5).forEach(function (v) {
      el("line", {x1: L, x2: W - R, y1: y(v), y2: y(v), "class": "grid"}, axes);
      el("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, axes).textContent =
        (v / s.scale).toPrecision(4).replace(/\.?0+$/, "");
    });
    el("text", {x: 12, y: T + (H - T - B) / 2, transform: "rotate(-90 12 " + (T + (H - T - B) / 2) + ")",
                "text-anchor": "middle"}, axes).textContent = s.unit;
    var every = Math.max(1, Math.ceil(nx / 12));
    s.commits.forEach(function (c, i) {
      if (i % every === 0)
        el("text", {x: x(i), y: H - B + 16, "text-anchor": "middle", "class": "commit-label"}, axes)
          .textContent = c.tag || (c.commit ? c.commit.slice(0, 7) : "#" + i);
    });
    (s.drifts || []).forEach(function (d) {
      el("rect", {x: x(d.start), y: T, width: Math.max(x(d.end) - x(d.start), 2), height: H - T - B,
                  "class": "drift", "data-commit": s.commits[d.start].commit || ""}, svg);
    });
    (s.minor || []).forEach(function (d) {  // within the noise: faint, and said so
      var at = (x(d.start) + x(d.end)) / 2;
      var line = el("line", {x1: at, x2: at, y1: T, y2: H - B, "class": "minor-step",
                             "data-commit": s.commits[d.end].commit || ""}, svg);
      el("title", {}, line).textContent = d.kind + " " + percent(d.size) +
        " within the noise (" + d.evidence + ")";
    });
    (s.steps || []).forEach(function (d) {
      var at = (x(d.start) + x(d.end)) / 2;
      var line = el("line", {x1: at, x2: at, y1: T, y2: H - B, "class": "step",
                             "data-commit": s.commits[d.end].commit || "", "data-size": d.size}, svg);
      el("title", {}, line).textContent = "step " + percent(d.size) + " (" + d.evidence + ")";
    });
    s.segments.forEach(function (seg) {  // one line per level: no slope drawn across a step
      var line = s.fit.slice(seg[0], seg[1]).map(function (v, i) { return x(seg[0] + i) + "," + y(v); });
      if (line.length === 1) line.push(line[0]);
      el("polyline", {points: line.join(" "), "class": "fit"}, svg);
    });
    var drawn = function (p) { return Math.min(Math.max(y(p.value), T), H - B); };
    var g = el("g", {"class": "points"}, svg);
    pts.forEach(function (p) {  // a counted run is within the scale: drawn where it is
      if (!p.left_out)
        el("line", {x1: x(p.x), x2: x(p.x), y1: y(p.low), y2: y(p.high), "class": "interval"}, g);
      var where = p.left_out ? " left-out" + (drawn(p) !== y(p.value) ? " clipped" : "") : "";
      el("circle", {cx: x(p.x), cy: drawn(p), r: 3.5, "class": "point" + where, "data-commit": p.commit || ""}, g);
    });
    var tip = document.createElement("div");
    tip.className = "tooltip";
    tip.hidden = true;
    div.appendChild(tip);
    svg.addEventListener("mousemove", function (ev) {
      var box = svg.getBoundingClientRect();
      var mx = (ev.clientX - box.left) * W / box.width, my = (ev.clientY - box.top) * H / box.height;
      // The nearest run as drawn: of a commit's runs, the one under the mouse.
      var far = function (p) { return Math.pow(x(p.x) - mx, 2) + Math.pow(drawn(p) - my, 2); };
      var best = null;
      pts.forEach(function (p) { if (!best || far(p) < far(best)) best = p; });
      var c = s.commits[best.x];
      tip.textContent = "";
      [(c.tag ? c.tag + " " : "") + (c.commit || "(no commit)") + (c.dirty ? " (dirty)" : "") +
         (c.branch ? " on " + c.branch : ""),
       c.subject || "", c.time || "",
       "run " + best.run + ": " + (best.value / s.scale).toPrecision(4) + " " + s.unit +
         " [" + (best.low / s.scale).toPrecision(4) + ", " + (best.high / s.scale).toPrecision(4) + "]",
       best.left_out ? "left out of the level: its core ran " + best.slowdown.toFixed(2) +
         "x slower than full speed (another tenant's work)" : "",
       best.env || ""].forEach(function (line) {
        if (!line) return;
        var d = document.createElement("div");
        d.textContent = line;
        tip.appendChild(d);
      });
      tip.dataset.commit = c.commit || "";
      tip.hidden = false;
      tip.style.left = (ev.clientX - box.left + 12) + "px";
      tip.style.top = (ev.clientY - box.top + 12) + "px";
    });
    svg.addEventListener("mouseleave", function () { tip.hidden = true; });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var data = JSON.parse(document.getElementById("opbench-data").textContent);
    document.querySelectorAll("div.chart[data-series]").forEach(function (div) {
      draw(div, data.series[div.dataset.series]);
    });
    document.body.dataset.chartsDrawn = String(document.querySelectorAll("svg.chart-svg").length);
  });
})();
