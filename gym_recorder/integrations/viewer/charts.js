// charts.js: line charts with a cursor, a zoomable step range and markers, and histograms, on
// <canvas>, no dependencies.
//
// Long series are decimated for drawing only: each pixel column draws the min..max of the
// samples it covers, so a 100k-step episode costs one pass over the visible range per redraw of
// the data layer, and moving the cursor only repaints a cached image plus one line.
//
// Zoom: a chart given a shared `view` ({x0, x1, yZoom, max}, owned by the page) draws the steps
// x0..x1 of an axis 0..max, its y range fitted to what is visible and narrowed by yZoom.
// Ctrl+wheel (or Alt, Cmd) zooms x around the pointer, with shift too it zooms y (a plain wheel
// scrolls the page); a drag draws a brush whose range becomes the view; a click
// moves the cursor. The page hears of both (onZoom, onCursor) and redraws every chart sharing
// the view.

import { fmtNum } from "./fmt.js";

const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
  "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#843c39", "#7b4173", "#3182bd"];

/** A stable colour for a series name (the same name always gets the same colour). */
export function colourOf(name) {
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619) >>> 0;
  return PALETTE[h % PALETTE.length];
}

export const PAD = { left: 48, right: 8, top: 8, bottom: 18 };
const BRUSH_MIN_PX = 4;        // a drag shorter than this is a click (moves the cursor)
const WHEEL_FACTOR = 1.25;     // one wheel notch zooms by this much
const MAX_Y_LABELS = 16;       // named y values (discrete actions) drawn at most

// The chart a mousedown started on: one window listener ends its drag (a listener per chart
// would keep every chart ever built, and its data, alive).
let active = null;
window.addEventListener("mouseup", () => {
  if (active) active.release();
  active = null;
});

export class LineChart {
  /**
   * @param {HTMLCanvasElement} canvas
   * @param {{onCursor?: (i:number)=>void, onZoom?: (x0:number, x1:number, yZoom:number)=>void,
   *   view?: {x0:number, x1:number, yZoom:number, max:number}, title?: string,
   *   yLabels?: string[], yLabelStart?: number, markers?: {x:number, colour:string}[]}} opts
   */
  constructor(canvas, opts = {}) {
    this.canvas = canvas;
    this.opts = opts;
    this.series = [];   // {name, data (ArrayLike of numbers), colour, visible, step, dash}
    this.cursor = 0;
    this.layer = null;
    this.brush = null;
    const indexAt = (ev) => {
      const rect = canvas.getBoundingClientRect();
      const x = (ev.clientX - rect.left) * (canvas.width / rect.width);
      const [x0, x1] = this.range;
      return { x, i: x0 + ((x - PAD.left) / this.plotW) * (x1 - x0) };
    };
    const clamp = (i) => Math.max(0, Math.min(this.opts.view ? this.last : this.n - 1, Math.round(i)));
    canvas.addEventListener("mousedown", (ev) => {
      if (!this.n) return;
      const at = indexAt(ev);
      this.dragging = { x: at.x, i: at.i };
      active = this;
      if (this.opts.onCursor) this.opts.onCursor(clamp(at.i));
    });
    canvas.addEventListener("mousemove", (ev) => {
      if (!this.dragging) return;
      const at = indexAt(ev);
      if (this.opts.onZoom && Math.abs(at.x - this.dragging.x) >= BRUSH_MIN_PX) {
        this.brush = [Math.min(at.x, this.dragging.x), Math.max(at.x, this.dragging.x)];
        this.brushRange = [Math.min(at.i, this.dragging.i), Math.max(at.i, this.dragging.i)];
        this.draw();
      } else if (!this.brush && this.opts.onCursor) this.opts.onCursor(clamp(at.i));
    });
    canvas.addEventListener("wheel", (ev) => {
      // (a plain wheel scrolls the page of panels; with Ctrl, Alt or Cmd it zooms)
      if (!this.opts.onZoom || !this.opts.view || !this.n || !(ev.ctrlKey || ev.altKey || ev.metaKey)) return;
      ev.preventDefault();
      const delta = ev.deltaY || ev.deltaX;   // (shift turns the wheel sideways in some browsers)
      if (!delta) return;
      const f = delta > 0 ? WHEEL_FACTOR : 1 / WHEEL_FACTOR;
      const view = this.opts.view;
      if (ev.shiftKey) { this.opts.onZoom(view.x0, view.x1, view.yZoom / f); return; }
      const [x0, x1] = this.range, centre = indexAt(ev).i;
      this.zoomTo(centre - (centre - x0) * f, centre + (x1 - centre) * f);
    }, { passive: false });
  }

  /** The mouse button went up (anywhere) after a mousedown on this chart: a brush zooms. */
  release() {
    if (this.dragging && this.brush) {
      const [a, b] = this.brushRange;
      this.brush = null;
      this.zoomTo(Math.floor(a), Math.ceil(b));
    }
    this.dragging = null;
  }

  /** Asks the page to show steps [a, b] (clamped to the data, at least 2 steps wide). */
  zoomTo(a, b) {
    const last = this.last;
    let x0 = Math.max(0, a), x1 = Math.min(last, b);
    if (x1 - x0 < 2) { const c = (x0 + x1) / 2; x0 = Math.max(0, c - 1); x1 = Math.min(last, x0 + 2); }
    this.opts.onZoom(x0, x1, this.opts.view ? this.opts.view.yZoom : 1);
  }

  get plotW() { return this.canvas.width - PAD.left - PAD.right; }
  get plotH() { return this.canvas.height - PAD.top - PAD.bottom; }
  get n() { return this.series.reduce((a, s) => Math.max(a, s.data.length), 0); }

  /** The last step of the axis: the shared view's (every chart sharing it aligns), else the data's. */
  get last() {
    const v = this.opts.view;
    return v && Number.isFinite(v.max) ? Math.max(v.max, 1) : Math.max(this.n - 1, 1);
  }

  /** The step range drawn: the shared view's, or the whole data. */
  get range() {
    const v = this.opts.view, last = this.last;
    if (!v) return [0, last];
    const x0 = Math.max(0, Math.min(v.x0, last - 1));
    return [x0, Math.max(Math.min(v.x1, last), x0 + 1)];
  }

  setSeries(series) {
    this.series = series;
    this.invalidate();
  }

  /** The data or the view changed: rebuild the cached layer and draw. */
  invalidate() {
    this.layer = null;
    this.draw();
  }

  setCursor(i) {
    this.cursor = i;
    this.draw();
  }

  /** The y range [lo, hi] the visible data of the visible steps spans (NaN-free). */
  yRange() {
    const [x0, x1] = this.range, a = Math.floor(x0), b = Math.ceil(x1);
    let lo = Infinity, hi = -Infinity;
    for (const s of this.series) {
      if (s.visible === false) continue;
      const d = s.data, end = Math.min(b, d.length - 1);
      for (let i = a; i <= end; i++) {
        const v = d[i];
        if (v < lo) lo = v;
        if (v > hi) hi = v;   // (NaN compares false both ways: skipped)
      }
    }
    if (!(lo <= hi) || !Number.isFinite(lo) || !Number.isFinite(hi)) { lo = 0; hi = 1; }
    if (lo === hi) { lo -= 0.5; hi += 0.5; }
    const z = this.opts.view ? this.opts.view.yZoom : 1;
    if (z !== 1) { const c = (lo + hi) / 2, h = (hi - lo) / 2 / z; lo = c - h; hi = c + h; }
    return [lo, hi];
  }

  _drawLayer() {
    const { width, height } = this.canvas;
    const layer = document.createElement("canvas");
    layer.width = width; layer.height = height;
    const g = layer.getContext("2d");
    g.fillStyle = "#fff"; g.fillRect(0, 0, width, height);
    const visible = this.series.filter((s) => s.visible !== false);
    const [x0, x1] = this.range, [lo, hi] = this.yRange(), W = this.plotW, H = this.plotH;
    const X = (i) => PAD.left + ((i - x0) / (x1 - x0)) * W;
    const Y = (v) => PAD.top + (1 - (v - lo) / (hi - lo)) * H;
    this.map = { X, Y, x0, x1, lo, hi };
    g.strokeStyle = "#ccc"; g.strokeRect(PAD.left, PAD.top, W, H);
    g.fillStyle = "#555"; g.font = "10px sans-serif";
    const names = this.opts.yLabels;
    if (names && names.length) {
      // Discrete values with names: one tick a value in range (when few enough to read).
      const start = this.opts.yLabelStart || 0, first = Math.ceil(lo), last = Math.floor(hi);
      if (last - first < MAX_Y_LABELS) {
        this.drawnYLabels = [];
        for (let v = first; v <= last; v++) {
          const name = names[v - start];
          if (name === undefined) continue;
          g.fillText(name.slice(0, 8), 2, Y(v) + 3);
          g.strokeStyle = "#eee"; g.beginPath(); g.moveTo(PAD.left, Y(v) + 0.5); g.lineTo(PAD.left + W, Y(v) + 0.5); g.stroke();
          this.drawnYLabels.push(name);
        }
      }
    } else {
      g.fillText(fmtNum(hi), 2, PAD.top + 8); g.fillText(fmtNum(lo), 2, PAD.top + H);
    }
    g.fillStyle = "#555";
    g.fillText(String(Math.round(x0)), PAD.left, height - 4);
    const right = String(Math.round(x1));
    g.fillText(right, PAD.left + W - g.measureText(right).width, height - 4);
    for (const m of this.opts.markers || []) {
      if (m.x < x0 || m.x > x1) continue;
      const x = Math.round(X(m.x)) + 0.5;
      g.strokeStyle = m.colour; g.lineWidth = 1; g.setLineDash([3, 2]);
      g.beginPath(); g.moveTo(x, PAD.top); g.lineTo(x, PAD.top + H); g.stroke();
      g.setLineDash([]);
    }
    g.save();
    g.beginPath(); g.rect(PAD.left, PAD.top, W, H); g.clip();
    for (const s of visible) this._drawSeries(g, s, X, Y, x0, x1, W);
    g.restore();
    if (this.opts.title) {
      g.font = "11px sans-serif";
      const t = this.opts.title, tw = g.measureText(t).width;
      g.fillStyle = "rgba(255,255,255,.8)"; g.fillRect(PAD.left + 2, PAD.top + 1, tw + 6, 13);
      g.fillStyle = "#263238"; g.fillText(t, PAD.left + 5, PAD.top + 11);
    }
    this.layer = layer;
  }

  _drawSeries(g, s, X, Y, x0, x1, W) {
    g.strokeStyle = s.colour; g.fillStyle = s.colour; g.lineWidth = s.width || 1;
    g.setLineDash(s.dash || []);
    const d = s.data, a = Math.max(0, Math.floor(x0)), b = Math.min(d.length - 1, Math.ceil(x1));
    const count = b - a + 1, span = x1 - x0;
    if (span <= 2 * W) {
      g.beginPath();
      let pen = false, prev = 0;
      for (let i = a; i <= b; i++) {
        const v = d[i];
        if (!Number.isFinite(v)) { pen = false; continue; }
        if (!pen) g.moveTo(X(i), Y(v));
        else if (s.step) { g.lineTo(X(i), Y(prev)); g.lineTo(X(i), Y(v)); } else g.lineTo(X(i), Y(v));
        pen = true; prev = v;
      }
      if (s.step && pen) g.lineTo(X(b + 1 <= x1 ? b + 1 : x1), Y(prev));
      g.stroke();
      if (count < W / 4) for (let i = a; i <= b; i++) if (Number.isFinite(d[i])) g.fillRect(X(i) - 1, Y(d[i]) - 1, 3, 3);
    } else {
      // Decimate: min..max of the samples under each pixel column.
      g.beginPath();
      for (let c = 0; c < W; c++) {
        const p = Math.floor(x0 + (c / W) * span), q = Math.min(d.length, Math.max(p + 1, Math.floor(x0 + ((c + 1) / W) * span)));
        let mn = Infinity, mx = -Infinity;
        for (let i = p; i < q; i++) { const v = d[i]; if (v < mn) mn = v; if (v > mx) mx = v; }
        if (mn <= mx) { g.moveTo(PAD.left + c + 0.5, Y(mn)); g.lineTo(PAD.left + c + 0.5, Y(mx) - 0.5); }
      }
      g.stroke();
    }
    g.setLineDash([]);
  }

  draw() {
    if (!this.layer) this._drawLayer();
    const g = this.canvas.getContext("2d");
    g.drawImage(this.layer, 0, 0);
    const { x0, x1 } = this.map;
    if (this.n && this.cursor >= x0 && this.cursor <= x1) {
      const x = Math.round(this.map.X(this.cursor)) + 0.5;
      g.strokeStyle = "#e00"; g.lineWidth = 1;
      g.beginPath(); g.moveTo(x, PAD.top); g.lineTo(x, PAD.top + this.plotH); g.stroke();
    }
    if (this.brush) {
      g.fillStyle = "rgba(30,120,220,.2)";
      g.fillRect(this.brush[0], PAD.top, this.brush[1] - this.brush[0], this.plotH);
    }
  }
}

/** Draws a histogram of `values` with `bins` bins. */
export function histogram(canvas, values, { bins = 20, colour = "#1f77b4", label = "" } = {}) {
  const g = canvas.getContext("2d"), { width, height } = canvas;
  g.fillStyle = "#fff"; g.fillRect(0, 0, width, height);
  const finite = values.filter(Number.isFinite);
  g.fillStyle = "#555"; g.font = "10px sans-serif"; g.fillText(label, PAD.left, 10);
  if (!finite.length) return [];
  let lo = finite.reduce((a, v) => Math.min(a, v), Infinity), hi = finite.reduce((a, v) => Math.max(a, v), -Infinity);
  if (lo === hi) { lo -= 0.5; hi += 0.5; }
  const counts = new Array(bins).fill(0);
  for (const v of finite) counts[Math.min(bins - 1, Math.floor(((v - lo) / (hi - lo)) * bins))]++;
  const top = counts.reduce((a, c) => Math.max(a, c), 0), W = width - PAD.left - PAD.right, H = height - PAD.top - PAD.bottom - 6;
  g.fillStyle = colour;
  counts.forEach((c, i) => {
    const h = (c / top) * H;
    g.fillRect(PAD.left + (i * W) / bins + 1, PAD.top + 6 + H - h, W / bins - 2, h);
  });
  g.fillStyle = "#555";
  g.fillText(fmtNum(lo), PAD.left, height - 4);
  g.fillText(fmtNum(hi), width - PAD.right - 40, height - 4);
  g.fillText(String(top), 2, PAD.top + 14);
  return counts;
}
