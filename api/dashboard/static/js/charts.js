// Line charts drawn as inline SVG: axes with round-number ticks, one polyline per series,
// a circle per data point (with a tooltip) and a legend. No library, nothing to download.

import { h } from "./dom.js";

const NS = "http://www.w3.org/2000/svg";
const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];
const MARGIN = { top: 28, right: 16, bottom: 44, left: 64 };

function svg(tag, attributes = {}, text) {
  const element = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
}

// About ``count`` ticks at 1, 2 or 5 times a power of ten, covering [low, high].
export function niceTicks(low, high, count = 5) {
  if (low === high) {
    const pad = Math.abs(low) * 0.1 || 1;
    return niceTicks(low - pad, high + pad, count);
  }
  const raw = (high - low) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((candidate) => candidate >= raw);
  const ticks = [];
  for (let tick = Math.floor(low / step) * step; tick <= high + step * 1e-9; tick += step) {
    ticks.push(Number(tick.toPrecision(12)));
  }
  if (ticks[ticks.length - 1] < high) ticks.push(Number((ticks[ticks.length - 1] + step).toPrecision(12)));
  return ticks;
}

function tickLabel(value) {
  if (Math.abs(value) >= 1e4 || (Math.abs(value) < 1e-2 && value !== 0)) return value.toExponential(1);
  return String(Number(value.toPrecision(4)));
}

/**
 * series: [{name, points: [{x, y}]}] (points with a null y are skipped).
 * Returns a <figure> holding the SVG, or an empty-state note when there is nothing to draw.
 */
export function lineChart({ title, xLabel, yLabel, series, width = 560, height = 280 }) {
  const drawn = series
    .map((item) => ({ ...item, points: item.points.filter((p) => p.y !== null && Number.isFinite(p.y)) }))
    .filter((item) => item.points.length);
  const figure = h("figure", { class: "chart", dataset: { chart: title } }, h("figcaption", {}, title));
  if (!drawn.length) {
    figure.append(h("p", { class: "empty" }, "No data yet."));
    return figure;
  }
  const xs = drawn.flatMap((item) => item.points.map((p) => p.x));
  const ys = drawn.flatMap((item) => item.points.map((p) => p.y));
  const xTicks = niceTicks(Math.min(...xs), Math.max(...xs));
  const yTicks = niceTicks(Math.min(0, ...ys), Math.max(...ys));
  const [x0, x1] = [xTicks[0], xTicks[xTicks.length - 1]];
  const [y0, y1] = [yTicks[0], yTicks[yTicks.length - 1]];
  const plotWidth = width - MARGIN.left - MARGIN.right;
  const plotHeight = height - MARGIN.top - MARGIN.bottom;
  const sx = (x) => MARGIN.left + ((x - x0) / (x1 - x0)) * plotWidth;
  const sy = (y) => MARGIN.top + plotHeight - ((y - y0) / (y1 - y0)) * plotHeight;

  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img" });
  root.append(svg("title", {}, title));
  for (const tick of yTicks) {
    root.append(svg("line", { class: "grid", x1: MARGIN.left, x2: width - MARGIN.right, y1: sy(tick), y2: sy(tick) }));
    root.append(svg("text", { class: "tick", x: MARGIN.left - 6, y: sy(tick) + 4, "text-anchor": "end" }, tickLabel(tick)));
  }
  for (const tick of xTicks) {
    root.append(svg("text", { class: "tick", x: sx(tick), y: height - MARGIN.bottom + 16, "text-anchor": "middle" }, tickLabel(tick)));
  }
  root.append(svg("line", { class: "axis", x1: MARGIN.left, x2: MARGIN.left, y1: MARGIN.top, y2: height - MARGIN.bottom }));
  root.append(svg("line", { class: "axis", x1: MARGIN.left, x2: width - MARGIN.right, y1: height - MARGIN.bottom, y2: height - MARGIN.bottom }));
  root.append(svg("text", { class: "label", x: MARGIN.left + plotWidth / 2, y: height - 8, "text-anchor": "middle" }, xLabel));
  root.append(
    svg("text", { class: "label", x: 14, y: MARGIN.top + plotHeight / 2, "text-anchor": "middle", transform: `rotate(-90 14 ${MARGIN.top + plotHeight / 2})` }, yLabel),
  );

  drawn.forEach((item, index) => {
    const colour = PALETTE[index % PALETTE.length];
    const group = svg("g", { class: "series", "data-series": item.name });
    const sorted = [...item.points].sort((a, b) => a.x - b.x);
    group.append(svg("polyline", { fill: "none", stroke: colour, "stroke-width": 2, points: sorted.map((p) => `${sx(p.x)},${sy(p.y)}`).join(" ") }));
    for (const point of sorted) {
      const circle = svg("circle", { class: "point", cx: sx(point.x), cy: sy(point.y), r: 3, fill: colour });
      circle.append(svg("title", {}, `${item.name}: ${xLabel} ${tickLabel(point.x)}, ${yLabel} ${tickLabel(point.y)}`));
      group.append(circle);
    }
    root.append(group);
    const legendY = MARGIN.top - 14 + 0;
    const legendX = MARGIN.left + 8 + index * Math.min(150, plotWidth / drawn.length);
    root.append(svg("rect", { x: legendX, y: legendY - 8, width: 10, height: 10, fill: colour }));
    root.append(svg("text", { class: "legend", x: legendX + 14, y: legendY + 1 }, item.name));
  });
  figure.append(root);
  return figure;
}
