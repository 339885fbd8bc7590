// frames.js: image leaves drawn on canvases, side by side, scaled without smoothing.
//
// A canvas holds the frame's own pixels (width x height, exactly the recorded values); its CSS
// size scales it: "fit" (the largest whole scale at which every image leaf fits side by side in the
// frames area, at most MAX_FIT_PX high) or a whole factor 1, 2, 3, 4.

import { esc } from "./fmt.js";

const FRAME_CACHE = 64;         // decoded frames kept per image leaf
const MAX_FIT_PX = 420;         // "fit" makes frames at most this high
const GAP_PX = 12;              // room between frames side by side (and their borders)

/** The CSS scale of frames of sizes [[w, h], ...] side by side in `width` px for `mode`. */
export function frameScale(mode, sizes, width) {
  if (mode !== "fit") return Math.max(1, Number(mode) || 1);
  if (!sizes.length) return 1;
  const totalW = sizes.reduce((a, [w]) => a + w, 0), maxH = sizes.reduce((a, [, h]) => Math.max(a, h), 0);
  const room = Math.max(1, width - GAP_PX * sizes.length);
  return Math.max(1, Math.floor(Math.min(room / totalW, MAX_FIT_PX / maxH)));  // whole: crisp pixels
}

export class FramePlayer {
  constructor(leaf, parent) {
    this.leaf = leaf;
    const [h, w] = leaf.rowShape;
    this.h = h; this.w = w; this.c = leaf.rowShape.length === 3 ? leaf.rowShape[2] : 1;
    this.box = document.createElement("div");
    this.box.className = "frame-box";
    this.title = document.createElement("h2");
    this.canvas = document.createElement("canvas");
    this.canvas.className = "frame";
    this.canvas.dataset.leaf = leaf.path;
    this.canvas.width = w; this.canvas.height = h;
    this.box.append(this.title, this.canvas);
    parent.append(this.box);
    this.cache = new Map();
    this.want = -1;
  }

  /** Sets the CSS size to `scale` times the frame (pixelated). */
  setScale(scale) {
    const cw = Math.round(this.w * scale), ch = Math.round(this.h * scale);
    this.canvas.style.width = `${cw}px`; this.canvas.style.height = `${ch}px`;
    const shown = Number.isInteger(scale) ? `×${scale}` : `×${scale.toFixed(2)}`;
    this.title.innerHTML = `${esc(this.leaf.path)} · ${this.w}×${this.h} <small>${shown}</small>`;
  }

  async frame(k) {
    if (this.cache.has(k)) return this.cache.get(k);
    const [part] = await this.leaf.readRows(k, k + 1);
    if (this.cache.size >= FRAME_CACHE) this.cache.delete(this.cache.keys().next().value);
    this.cache.set(k, part.data);
    return part.data;
  }

  async show(k) {
    this.want = k;
    if (k >= this.leaf.rows) return;
    const px = await this.frame(k);
    if (this.want !== k) return;
    const img = new ImageData(this.w, this.h), d = img.data, n = this.w * this.h, c = this.c;
    for (let i = 0; i < n; i++) {
      if (c === 1) { d[4 * i] = d[4 * i + 1] = d[4 * i + 2] = px[i]; d[4 * i + 3] = 255; } else {
        d[4 * i] = px[c * i]; d[4 * i + 1] = px[c * i + 1]; d[4 * i + 2] = px[c * i + 2];
        d[4 * i + 3] = c === 4 ? px[c * i + 3] : 255;
      }
    }
    this.canvas.getContext("2d").putImageData(img, 0, 0);
    this.canvas.dataset.step = String(k);
    this.frame(k + 1).catch(() => {}); // read ahead for playback
  }
}
