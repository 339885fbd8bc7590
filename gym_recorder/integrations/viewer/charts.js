// charts.js: line charts with a cursor and histograms on <canvas>, no dependencies.
//
// Long series are decimated for drawing only: each pixel column draws the min..max of the
// samples it covers, so a 100k-step episode costs one pass per redraw of the data layer, and
// moving the cursor only repaints a cached image plus one line.

const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
  "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#843c39", "#7b4173", "#3182bd"];

/** A stable colour for a series name (the same name always gets the same colour). */
export function colourOf(name) {
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619) >>> 0;
  return PALETTE[h % PALETTE.length];
}

const PAD = { left: 48, right: 8, top: 8, bottom: 18 };

function fmt(v) {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  return a !== 0 && (a >= 1e5 || a < 1e-3) ? v.toExponential(2) : String(Number(v.toPrecision(4)));
}

export class LineChart {
  /**
   * @param {HTMLCanvasElement} canvas
   * @param {{onCursor?: (i:number)=>void, xLabel?: string}} opts
   */
  constructor(canvas, opts = {}) {
    this.canvas = canvas;
    this.opts = opts;
    this.series = [];   // {name, data (ArrayLike of numbers), colour, visible}
    this.cursor = 0;
    this.layer = null;
    const pick = (ev) => {
      if (!this.opts.onCursor || !this.n) return;
      const rect = canvas.getBoundingClientRect();
      const x = (ev.clientX - rect.left) * (canvas.width / rect.width);
      const i = Math.round(((x - PAD.left) / this.plotW) * (this.n - 1));
      this.opts.onCursor(Math.max(0, Math.min(this.n - 1, i)));
    };
    canvas.addEventListener("mousedown", (ev) => { this.dragging = true; pick(ev); });
    canvas.addEventListener("mousemove", (ev) => { if (this.dragging) pick(ev); });
    window.addEventListener("mouseup", () => { this.dragging = false; });
  }

  get plotW() { return this.canvas.width - PAD.left - PAD.right; }
  get plotH() { return this.canvas.height - PAD.top - PAD.bottom; }
  get n() { return this.series.reduce((a, s) => Math.max(a, s.data.length), 0); }

  setSeries(series) {
    this.series = series;
    this.layer = null;
    this.draw();
  }

  setCursor(i) {
    this.cursor = i;
    this.draw();
  }

  _drawLayer() {
    const { width, height } = this.canvas;
    const layer = document.createElement("canvas");
    layer.width = width; layer.height = height;
    const g = layer.getContext("2d");
    g.fillStyle = "#fff"; g.fillRect(0, 0, width, height);
    const visible = this.series.filter((s) => s.visible !== false);
    let lo = Infinity, hi = -Infinity;
    for (const s of visible) for (let i = 0; i < s.data.length; i++) {
      const v = s.data[i];
      if (Number.isFinite(v)) { if (v < lo) lo = v; if (v > hi) hi = v; }
    }
    if (!(lo <= hi)) { lo = 0; hi = 1; }
    if (lo === hi) { lo -= 0.5; hi += 0.5; }
    const n = Math.max(this.n, 2), W = this.plotW, H = this.plotH;
    const X = (i) => PAD.left + (i / (n - 1)) * W, Y = (v) => PAD.top + (1 - (v - lo) / (hi - lo)) * H;
    g.strokeStyle = "#ccc"; g.strokeRect(PAD.left, PAD.top, W, H);
    g.fillStyle = "#555"; g.font = "10px sans-serif";
    g.fillText(fmt(hi), 2, PAD.top + 8); g.fillText(fmt(lo), 2, PAD.top + H);
    g.fillText("0", PAD.left, height - 4); g.fillText(String(n - 1), PAD.left + W - 30, height - 4);
    for (const s of visible) {
      g.strokeStyle = s.colour; g.fillStyle = s.colour; g.lineWidth = 1;
      const len = s.data.length;
      if (len <= 2 * W) {
        g.beginPath();
        let pen = false;
        for (let i = 0; i < len; i++) {
          const v = s.data[i];
          if (!Number.isFinite(v)) { pen = false; continue; }
          if (pen) g.lineTo(X(i), Y(v)); else g.moveTo(X(i), Y(v));
          pen = true;
        }
        g.stroke();
        if (len < W / 4) for (let i = 0; i < len; i++) if (Number.isFinite(s.data[i])) g.fillRect(X(i) - 1, Y(s.data[i]) - 1, 3, 3);
      } else {
        // Decimate: min..max of the samples under each pixel column.
        g.beginPath();
        for (let c = 0; c < W; c++) {
          const a = Math.floor((c / W) * len), b = Math.max(a + 1, Math.floor(((c + 1) / W) * len));
          let mn = Infinity, mx = -Infinity;
          for (let i = a; i < b; i++) { const v = s.data[i]; if (v < mn) mn = v; if (v > mx) mx = v; }
          if (mn <= mx) { g.moveTo(PAD.left + c + 0.5, Y(mn)); g.lineTo(PAD.left + c + 0.5, Y(mx) - 0.5); }
        }
        g.stroke();
      }
    }
    this.layer = layer;
    this.map = { X };
  }

  draw() {
    if (!this.layer) this._drawLayer();
    const g = this.canvas.getContext("2d");
    g.drawImage(this.layer, 0, 0);
    if (this.n) {
      const x = Math.round(this.map.X(Math.min(this.cursor, this.n - 1))) + 0.5;
      g.strokeStyle = "#e00"; g.lineWidth = 1;
      g.beginPath(); g.moveTo(x, PAD.top); g.lineTo(x, PAD.top + this.plotH); g.stroke();
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
  g.fillText(fmt(lo), PAD.left, height - 4);
  g.fillText(fmt(hi), width - PAD.right - 40, height - 4);
  g.fillText(String(top), 2, PAD.top + 14);
  return counts;
}
