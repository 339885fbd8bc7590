// panels.js: an episode's series as small multiples, one panel a dimension, the page's width.
//
// Every panel shares one view (the step range and y zoom) and the episode's markers
// (terminated / truncated steps); a second episode, when compared, is drawn over each panel as
// a dashed series on the same step axis.

import { LineChart, colourOf } from "./charts.js";
import { esc } from "./fmt.js";

const PANEL_H = 72;                  // px, one panel's height
const NAME_ROW_PX = 11;              // px per named value (discrete actions with names)
const MAX_NAMED_PANEL_PX = 240;      // a panel of many named actions grows at most to this
export const COMPARE_COLOUR = "#212121";   // the compared episode's series, dashed (not in the palette)

/**
 * Builds the panels of `groups` ({title, names, cols, step, yLabels, yLabelStart, compare})
 * into `container`; returns the charts.
 */
export function buildPanels(container, groups, { view, markers, hidden, onCursor, onZoom, onToggle, compareLabel }) {
  container.innerHTML = "";
  const charts = [];
  for (const g of groups) {
    const box = document.createElement("div");
    box.className = "chart-box";
    container.append(box);
    const width = Math.max(320, Math.floor(box.clientWidth || 900));
    box.dataset.group = g.title;
    box.innerHTML = `<h2>${esc(g.title)}</h2>`;
    if (g.names.length > 1) {
      const toggles = document.createElement("div");
      toggles.className = "toggles";
      toggles.innerHTML = g.names.map((name) =>
        `<label><input type="checkbox" data-series="${esc(name)}"${hidden.has(name) ? "" : " checked"}>` +
        `<span class="swatch" style="background:${colourOf(name)}"></span>${esc(name.slice(g.title.length).replace(/^\//, "") || name)}</label>`).join("");
      toggles.addEventListener("change", (ev) => {
        const name = ev.target.dataset.series;
        if (name !== undefined) onToggle(name, ev.target.checked);
      });
      box.append(toggles);
    }
    g.names.forEach((name, j) => {
      const canvas = document.createElement("canvas");
      canvas.className = "series-panel";
      canvas.dataset.series = name;
      // (a named discrete value a row of text: such panels grow to keep the names readable)
      const h = g.yLabels ? Math.min(MAX_NAMED_PANEL_PX, Math.max(PANEL_H, NAME_ROW_PX * g.yLabels.length + 26)) : PANEL_H;
      canvas.width = width; canvas.height = h; canvas.style.height = `${h}px`;
      canvas.hidden = hidden.has(name);
      const chart = new LineChart(canvas, { view, markers, onCursor, onZoom, title: name,
        yLabels: g.yLabels, yLabelStart: g.yLabelStart });
      chart.name = name;
      const series = [{ name, data: g.cols[j], colour: colourOf(name), step: g.step }];
      if (g.compare && g.compare[j]) {
        series.push({ name: `${name} ${compareLabel}`, data: g.compare[j], colour: COMPARE_COLOUR, step: g.step, dash: [5, 3], width: 1.5 });
      }
      chart.series = series;
      box.append(canvas);
      charts.push(chart);
    });
  }
  for (const c of charts) if (!c.canvas.hidden) c.invalidate();
  return charts;
}

/** Markers of an episode: a dashed line where it terminated (red) or was truncated (orange). */
export function endMarkers(terminations, truncations) {
  const out = [];
  const add = (col, colour, kind) => {
    if (!col) return;
    for (let i = 0; i < col.length; i++) if (col[i]) out.push({ x: i + 1, colour, kind });
  };
  add(terminations, "#c62828", "terminated");
  add(truncations, "#ef6c00", "truncated");
  return out;
}
