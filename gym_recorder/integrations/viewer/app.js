// app.js: the viewer page. Reads the recording through data.js (which decodes with decode.js).

import { Recording, stats } from "./data.js";
import { LineChart, histogram, colourOf } from "./charts.js";
import { agentLeaves, columnNames, showPicker } from "./agents.js";

const $ = (id) => document.getElementById(id);
const FPS = 30;                 // playback frames per second at 1x
const FRAME_CACHE = 64;         // decoded frames kept per image leaf
const URL_UPDATE_MS = 250;      // browsers throttle history.replaceState; update at most this often
const MAX_DEFAULT_SERIES_LEAVES = 8;
const MAX_FRAME_PX = 320;       // frames are drawn at an integer scale up to about this size
const MAX_FRAME_SCALE = 8;
const ROW_H = 22;               // px, the table's fixed row height (see style.css)
const OVERSCAN_ROWS = 20;       // rows drawn above and below the visible ones

const state = {
  rec: new Recording(),
  rows: [],
  sortKey: "index", sortDir: 1, filter: "",
  episode: null, data: null, step: 0, steps: 0,
  chosen: new Set(), chosenInit: false,   // leaf paths shown (kept across episodes)
  agent: "",                              // multi-agent recordings: the agent shown, "" all
  hidden: new Set(),                      // series names toggled off (kept across episodes)
  charts: [], players: [], series: new Map(),
  playing: false, timer: null, urlTimer: null, loadToken: 0,
};
window.viewer = { state, stats, timings: {}, select: (i, step = 0) => selectEpisode(i, step) };

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function showError(e) {
  console.error(e);
  const el = $("error");
  el.hidden = false;
  el.textContent = `Error: ${e && e.message ? e.message : e}`;
  document.body.dataset.state = "error";
}

function fmtReturn(v) { return Number.isFinite(v) ? String(Number(v.toPrecision(12))) : String(v); }

// -- the episode table ------------------------------------------------------------------------

function matches(ep, filter) {
  if (!filter) return true;
  const m = /^\s*(index|length|return|seed|end|env|writer)\s*(<=|>=|!=|=|<|>)\s*(.+?)\s*$/.exec(filter);
  if (m) {
    const key = { writer: "writerName" }[m[1]] || m[1], v = ep[key], op = m[2], w = m[3];
    const num = Number(w), a = typeof v === "number" && !Number.isNaN(num) ? v : String(v);
    const b = typeof a === "number" ? num : w;
    return { "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b, "=": a === b, "!=": a !== b }[op];
  }
  const text = `${ep.index} ${ep.writerName} ${ep.env} ${ep.length} ${fmtReturn(ep.return)} ${ep.end} ${ep.seed}`;
  return text.toLowerCase().includes(filter.toLowerCase());
}

function renderTable() {
  const key = state.sortKey, dir = state.sortDir;
  const rows = state.rec.episodes.filter((ep) => matches(ep, state.filter));
  rows.sort((a, b) => {
    const x = a[key], y = b[key];
    if (x === y) return a.index - b.index;
    if (x === null || x === undefined) return 1;
    if (y === null || y === undefined) return -1;
    return (x < y ? -1 : 1) * dir;
  });
  state.rows = rows;
  drawRows();
  for (const th of $("episodes").tHead.rows[0].cells) {
    th.className = th.dataset.key === key ? (dir > 0 ? "asc" : "desc") : "";
  }
  $("count").textContent = `${rows.length} of ${state.rec.episodes.length}`;
}

// The table draws only the rows in view (plus some): 100k episodes cost what 60 do.
function drawRows() {
  const wrap = $("table-wrap"), rows = state.rows;
  const first = Math.max(0, Math.floor(wrap.scrollTop / ROW_H) - OVERSCAN_ROWS);
  const last = Math.min(rows.length, first + Math.ceil((wrap.clientHeight || 360) / ROW_H) + 2 * OVERSCAN_ROWS);
  const sel = state.episode ? state.episode.index : -1;
  const spacer = (n) => (n > 0 ? `<tr class="spacer" style="height:${n * ROW_H}px"><td colspan="7"></td></tr>` : "");
  $("episodes").tBodies[0].innerHTML = spacer(first) + rows.slice(first, last).map((ep) =>
    `<tr data-index="${ep.index}"${ep.index === sel ? ' class="selected"' : ""}><td class="num">${ep.index}</td>` +
    `<td title="${esc(ep.writerName)}">${esc(ep.writerName.slice(-14))}</td><td>${esc(ep.env ?? "")}</td>` +
    `<td class="num">${ep.length}</td><td class="num" data-value="${ep.return}">${fmtReturn(ep.return)}</td>` +
    `<td>${esc(ep.end ?? "")}</td><td class="num">${ep.seed ?? ""}</td></tr>`).join("") + spacer(rows.length - last);
}

function scrollToEpisode(index) {
  const pos = state.rows.findIndex((ep) => ep.index === index), wrap = $("table-wrap");
  if (pos < 0) return;
  const top = pos * ROW_H, h = wrap.clientHeight - 2 * ROW_H;
  if (top < wrap.scrollTop || top > wrap.scrollTop + h) wrap.scrollTop = Math.max(0, top - h / 2);
  drawRows();
}

function renderOverview() {
  const eps = state.rec.episodes;
  const onPick = (i) => selectEpisode(i, 0);
  if (!state.returnChart) {
    state.returnChart = new LineChart($("chart-return"), { onCursor: onPick });
    state.lengthChart = new LineChart($("chart-length"), { onCursor: onPick });
  }
  state.returnChart.setSeries([{ name: "return", data: Float64Array.from(eps, (e) => e.return), colour: colourOf("return") }]);
  state.lengthChart.setSeries([{ name: "length", data: Float64Array.from(eps, (e) => e.length), colour: colourOf("length") }]);
  state.histograms = {
    returns: histogram($("hist-return"), eps.map((e) => e.return), { colour: colourOf("return"), label: "episodes" }),
    lengths: histogram($("hist-length"), eps.map((e) => e.length), { colour: colourOf("length"), label: "episodes" }),
  };
  const writers = state.rec.writers.length, legacy = state.rec.writers.filter((w) => w.legacy).length;
  $("status").textContent = `${eps.length} episodes, ${writers} writer${writers === 1 ? "" : "s"}` +
    (legacy ? ` (${legacy} gym-recording)` : "") + ` · ${stats.requests} requests, ${(stats.bytes / 1e6).toFixed(2)} MB read`;
}

// -- one episode ------------------------------------------------------------------------------

// Tree nodes have no prototype and mark their leaf with a symbol, so that Dict keys such as
// "__proto__", "constructor" or "__leaf" are plain children (not Object.prototype's members).
const LEAF = Symbol("leaf");

function leafTree(paths) {
  const root = Object.create(null);
  for (const p of paths) {
    let node = root;
    for (const part of p.split("/")) node = node[part] ??= Object.create(null);
    node[LEAF] = p;
  }
  return root;
}

function renderTree(leaves) {
  const html = (node, name) => {
    const kids = Object.keys(node);
    let out = "<li>";
    if (node[LEAF]) {
      const leaf = leaves.get(node[LEAF]), kind = leaf.kind;
      const shape = leaf.rowShape ? `[${leaf.rowShape.join("×")}] ${leaf.dtype}` : "values";
      const box = kind === "series" || kind === "image"
        ? `<input type="checkbox" data-leaf="${esc(leaf.path)}"${state.chosen.has(leaf.path) ? " checked" : ""}>` : "";
      out += `<label title="${esc(leaf.path)}">${box}${esc(name)} <small>${esc(shape)}${kind === "image" ? " image" : ""}</small></label>`;
    } else out += `<span>${esc(name)}</span>`;
    if (kids.length) out += "<ul>" + kids.map((k) => html(node[k], k)).join("") + "</ul>";
    return out + "</li>";
  };
  const tree = leafTree([...leaves.keys()]);
  $("tree").innerHTML = "<ul>" + Object.keys(tree).map((k) => html(tree[k], k)).join("") + "</ul>";
}

async function selectEpisode(index, step) {
  const ep = state.rec.episodes[index];
  if (!ep) return;
  const token = ++state.loadToken;
  pause();
  document.body.dataset.state = "loading-episode";
  state.episode = ep;
  scrollToEpisode(index);
  for (const tr of $("episodes").tBodies[0].rows) tr.classList.toggle("selected", Number(tr.dataset.index) === index);
  const data = state.rec.episodeData(ep);
  const leaves = new Map([...data.observations, ...data.actions]);
  if (!state.chosenInit) {
    let n = 0, images = 0;
    for (const leaf of leaves.values()) {
      if (leaf.kind === "series" && n < MAX_DEFAULT_SERIES_LEAVES) { state.chosen.add(leaf.path); n++; }
      if (leaf.kind === "image" && images < 2) { state.chosen.add(leaf.path); images++; }
    }
    state.chosenInit = true;
  }
  const seriesLeaves = [...leaves.values(), data.rewards, data.terminations, data.truncations].filter((l) => l.kind === "series" && l.rows);
  const loaded = await Promise.all(seriesLeaves.map((l) => l.readSeries()));
  if (token !== state.loadToken) return;
  state.data = data;
  state.leaves = leaves;
  state.series = new Map(seriesLeaves.map((l, i) => [l.path, loaded[i]]));
  state.steps = ep.length;
  $("episode-title").textContent = `Episode ${ep.index} · ${ep.env ?? "unknown env"} · ${ep.length} steps · return ${fmtReturn(ep.return)}` +
    (ep.end ? ` · ${ep.end}` : "") + (ep.legacy ? " · gym-recording" : "");
  $("scrub").max = String(ep.length);
  state.returnChart.setCursor(ep.index);
  state.lengthChart.setCursor(ep.index);
  state.agent = showPicker($("agent"), ep.multiagent, state.agent);
  renderTree(leaves);
  buildViews();
  await setStep(Math.max(0, Math.min(step, ep.length)), true);
  if (token === state.loadToken) document.body.dataset.state = "ready";
}

function buildViews() {
  const charts = $("charts"), frames = $("frames");
  charts.innerHTML = ""; frames.innerHTML = "";
  state.charts = []; state.players = [];
  const chartOf = (title, names, cols) => {
    const box = document.createElement("div");
    box.className = "chart-box";
    box.innerHTML = `<h2>${esc(title)}</h2>`;
    const toggles = document.createElement("div");
    toggles.className = "toggles";
    const canvas = document.createElement("canvas");
    canvas.width = 640; canvas.height = 130;
    const chart = new LineChart(canvas, { onCursor: (i) => setStep(i) });
    const series = names.map((name, j) => ({ name, data: cols[j], colour: colourOf(name), visible: !state.hidden.has(name) }));
    if (names.length > 1) {
      toggles.innerHTML = series.map((s) =>
        `<label><input type="checkbox" data-series="${esc(s.name)}"${s.visible ? " checked" : ""}>` +
        `<span class="swatch" style="background:${s.colour}"></span>${esc(s.name)}</label>`).join("");
      toggles.addEventListener("change", (ev) => {
        const name = ev.target.dataset.series;
        if (ev.target.checked) state.hidden.delete(name); else state.hidden.add(name);
        for (const s of series) s.visible = !state.hidden.has(s.name);
        chart.setSeries(series);
      });
    }
    box.append(toggles, canvas);
    charts.append(box);
    chart.setSeries(series);
    chart.setCursor(state.step);
    state.charts.push(chart);
  };
  for (const leaf of state.leaves.values()) {
    if (!state.chosen.has(leaf.path)) continue;
    if (leaf.kind === "series") {
      const cols = state.series.get(leaf.path);
      chartOf(leaf.path, columnNames(leaf, cols, state.episode.multiagent), cols);
    } else if (leaf.kind === "image") state.players.push(new FramePlayer(leaf, frames));
  }
  if (state.series.has("rewards")) chartOf("rewards", ["rewards"], state.series.get("rewards"));
  const ma = state.episode.multiagent, perAgent = state.series.get("observations/rewards");
  if (ma && perAgent && perAgent.length === ma.agents.length) {
    const shown = ma.agents.map((a, j) => [a, perAgent[j]]).filter(([a]) => !state.agent || a === state.agent);
    chartOf("rewards by agent", shown.map(([a]) => a), shown.map(([, c]) => c));
  }
}

class FramePlayer {
  constructor(leaf, parent) {
    this.leaf = leaf;
    const [h, w] = leaf.rowShape;
    this.h = h; this.w = w; this.c = leaf.rowShape.length === 3 ? leaf.rowShape[2] : 1;
    const scale = Math.max(1, Math.min(MAX_FRAME_SCALE, Math.floor(Math.min(MAX_FRAME_PX / w, MAX_FRAME_PX / h))));
    const box = document.createElement("div");
    box.className = "chart-box";
    box.innerHTML = `<h2>${esc(leaf.path)} · ${w}×${h}${scale > 1 ? ` ×${scale}` : ""}</h2>`;
    this.canvas = document.createElement("canvas");
    this.canvas.className = "frame";
    this.canvas.dataset.leaf = leaf.path;
    this.canvas.width = w; this.canvas.height = h;
    this.canvas.style.width = `${w * scale}px`; this.canvas.style.height = `${h * scale}px`;
    box.append(this.canvas);
    parent.append(box);
    this.cache = new Map();
    this.want = -1;
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

function rowValues(path, k) {
  const cols = state.series.get(path);
  if (cols && cols.length === 0) return []; // rows of no elements (a Box of shape (0,))
  if (!cols || k >= cols[0].length) return undefined;
  const v = cols.map((c) => c[k]);
  return v.length === 1 && !(state.leaves.get(path)?.rowShape?.length) ? v[0] : v;
}

async function setStep(k, force = false) {
  if (!state.episode) return;
  k = Math.max(0, Math.min(k, state.steps));
  if (k === state.step && !force) return;
  state.step = k;
  $("scrub").value = String(k);
  $("step-label").textContent = `step ${k} / ${state.steps}`;
  for (const c of state.charts) c.setCursor(k);
  scheduleURL();
  const shown = Promise.all(state.players.map((p) => p.show(k)));
  const at = { step: k };
  for (const leaf of state.leaves.values()) {
    if (leaf.kind === "series") at[leaf.path] = rowValues(leaf.path, k);
    else if (leaf.kind === "values") at[leaf.path] = leaf.values[k];
    else at[leaf.path] = `[${leaf.rowShape.join("×")}] ${leaf.dtype}`;
  }
  if (k < state.steps) {
    at.reward = rowValues("rewards", k);
    at.terminated = Boolean(rowValues("terminations", k));
    at.truncated = Boolean(rowValues("truncations", k));
  }
  try {
    at.info = await state.data.infos.at(k);
  } catch (e) { at.info = `unreadable: ${e.message}`; }
  if (state.step === k) $("info").textContent = Object.entries(at).map(([key, v]) => `${key}: ${JSON.stringify(v)}`).join("\n");
  await shown;
}

function scheduleURL() {
  if (state.urlTimer) return;
  state.urlTimer = setTimeout(() => {
    state.urlTimer = null;
    if (state.episode) history.replaceState(null, "", `?episode=${state.episode.index}&step=${state.step}`);
  }, URL_UPDATE_MS);
}

function play() {
  if (!state.episode) return;
  if (state.step >= state.steps) setStep(0);
  state.playing = true;
  $("play").textContent = "❚❚";
  const tick = async () => {
    if (!state.playing) return;
    const t0 = performance.now();
    if (state.step >= state.steps) { pause(); return; }
    await setStep(state.step + 1);
    const wait = 1000 / (FPS * Number($("speed").value)) - (performance.now() - t0);
    state.timer = setTimeout(tick, Math.max(0, wait));
  };
  tick();
}

function pause() {
  state.playing = false;
  clearTimeout(state.timer);
  $("play").textContent = "▶";
}

// -- wiring -----------------------------------------------------------------------------------

async function refresh() {
  const sel = state.episode ? state.episode.index : 0, step = state.step;
  await state.rec.load();
  renderTable();
  renderOverview();
  if (state.rec.episodes.length) await selectEpisode(Math.min(sel, state.rec.episodes.length - 1), step);
}

function wire() {
  $("episodes").tHead.addEventListener("click", (ev) => {
    const key = ev.target.dataset.key;
    if (!key) return;
    state.sortDir = state.sortKey === key ? -state.sortDir : 1;
    state.sortKey = key;
    renderTable();
  });
  $("episodes").tBodies[0].addEventListener("click", (ev) => {
    const tr = ev.target.closest("tr[data-index]");
    if (tr) selectEpisode(Number(tr.dataset.index), 0).catch(showError);
  });
  $("table-wrap").addEventListener("scroll", () => requestAnimationFrame(drawRows));
  $("filter").addEventListener("input", (ev) => { state.filter = ev.target.value.trim(); renderTable(); });
  $("tree").addEventListener("change", (ev) => {
    const path = ev.target.dataset.leaf;
    if (!path) return;
    if (ev.target.checked) state.chosen.add(path); else state.chosen.delete(path);
    buildViews();
    setStep(state.step, true);
  });
  $("agent").addEventListener("change", (ev) => {
    state.agent = ev.target.value;
    if (state.agent) state.chosen = new Set(agentLeaves(state.leaves, state.agent));
    renderTree(state.leaves);
    buildViews();
    setStep(state.step, true);
  });
  $("scrub").addEventListener("input", (ev) => setStep(Number(ev.target.value)));
  $("prev").addEventListener("click", () => { pause(); setStep(state.step - 1); });
  $("next").addEventListener("click", () => { pause(); setStep(state.step + 1); });
  $("play").addEventListener("click", () => (state.playing ? pause() : play()));
  $("refresh").addEventListener("click", () => refresh().catch(showError));
  document.addEventListener("keydown", (ev) => {
    const t = ev.target;
    if (t.tagName === "INPUT" && (t.type === "search" || t.type === "text")) return;
    if (t.tagName === "SELECT") return;
    if (ev.key === "ArrowLeft") { ev.preventDefault(); pause(); setStep(state.step - 1); }
    else if (ev.key === "ArrowRight") { ev.preventDefault(); pause(); setStep(state.step + 1); }
    else if (ev.key === " ") { ev.preventDefault(); state.playing ? pause() : play(); }
  });
}

async function main() {
  wire();
  const params = new URLSearchParams(location.search);
  const episode = Math.max(0, parseInt(params.get("episode") ?? "0", 10) || 0);
  const step = Math.max(0, parseInt(params.get("step") ?? "0", 10) || 0);
  await state.rec.load();
  renderTable();
  window.viewer.timings.tableMs = performance.now();
  document.body.dataset.table = "shown";
  renderOverview();
  if (!state.rec.episodes.length) { document.body.dataset.state = "ready"; $("episode-title").textContent = "No episodes yet"; return; }
  await selectEpisode(Math.min(episode, state.rec.episodes.length - 1), step);
}

main().catch(showError);
