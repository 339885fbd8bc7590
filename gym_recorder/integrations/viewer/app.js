// app.js: the viewer page. Reads the recording through data.js (which decodes with decode.js).

import { Recording, stats } from "./data.js";
import { LineChart, histogram, colourOf } from "./charts.js";
import { fmtNum, fmtValue, dtypeName, esc } from "./fmt.js";

// The episode's modules load while the table is read and drawn (the table needs none of them).
const later = Promise.all([import("./frames.js"), import("./panels.js"), import("./infoseries.js"), import("./dataset.js")]);
let FramePlayer, frameScale, buildPanels, endMarkers, infoSeries, robustOutliers, dimensionStats;
const loaded = later.then(([frames, panels, infos, dataset]) => {
  ({ FramePlayer, frameScale } = frames);
  ({ buildPanels, endMarkers } = panels);
  ({ infoSeries } = infos);
  ({ robustOutliers, dimensionStats } = dataset);
});
import { filteredSorted, rowHTML, treeHTML } from "./table.js";
import { agentLeaves, columnNames, showPicker } from "./agents.js";

const $ = (id) => document.getElementById(id);
const FPS = 30;                 // playback frames per second at 1x
const URL_UPDATE_MS = 250;      // browsers throttle history.replaceState; update at most this often
const MAX_DEFAULT_SERIES_LEAVES = 8;
const MAX_STATS_EPISODES = 2000;  // episodes read for the per-dimension statistics at most
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
  charts: [], players: [], series: new Map(), infoSeries: new Map(), markers: [],
  view: { x0: 0, x1: 1, max: 1, yZoom: 1 },  // the step range every panel shows (shared)
  frameScale: "fit", compare: null,          // compare: {ep, series: Map} of a second episode
  playing: false, timer: null, urlTimer: null, loadToken: 0,
};
window.viewer = { state, stats, timings: {}, select: (i, step = 0) => selectEpisode(i, step),
  zoom: (x0, x1) => zoom(x0, x1, state.view.yZoom), compare: (i) => compareWith(i) };

function showError(e) {
  console.error(e);
  const el = $("error");
  el.hidden = false;
  el.textContent = `Error: ${e && e.message ? e.message : e}`;
  document.body.dataset.state = "error";
}

// -- the episode table ------------------------------------------------------------------------

function renderTable() {
  const key = state.sortKey, dir = state.sortDir;
  const rows = filteredSorted(state.rec.episodes, state.filter, key, dir);
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
  const spacer = (n) => (n > 0 ? `<tr class="spacer" style="height:${n * ROW_H}px"><td colspan="8"></td></tr>` : "");
  $("episodes").tBodies[0].innerHTML = spacer(first) + rows.slice(first, last).map((ep) => rowHTML(ep, sel)).join("") +
    spacer(rows.length - last);
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
  robustOutliers(eps);
  const writers = state.rec.writers.length, legacy = state.rec.writers.filter((w) => w.legacy).length;
  $("status").textContent = `${eps.length} episodes, ${writers} writer${writers === 1 ? "" : "s"}` +
    (legacy ? ` (${legacy} gym-recording)` : "") + ` · ${stats.requests} requests, ${(stats.bytes / 1e6).toFixed(2)} MB read`;
}

// -- one episode ------------------------------------------------------------------------------

function renderTree(leaves) {
  $("tree").innerHTML = treeHTML(leaves, state.chosen);
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
      if (leaf.kind === "image" && images < 4) { state.chosen.add(leaf.path); images++; }
    }
    state.chosenInit = true;
  }
  const seriesLeaves = [...leaves.values(), data.rewards, data.terminations, data.truncations].filter((l) => l.kind === "series" && l.rows);
  const [loaded, infos] = await Promise.all([Promise.all(seriesLeaves.map((l) => l.readSeries())),
    infoSeries(data.infos).catch(() => new Map())]);
  if (token !== state.loadToken) return;
  state.data = data;
  state.leaves = leaves;
  state.series = new Map(seriesLeaves.map((l, i) => [l.path, loaded[i]]));
  state.infoSeries = infos;
  state.steps = ep.length;
  state.view = { x0: 0, x1: Math.max(ep.length, 1), max: Math.max(ep.length, 1), yZoom: 1 };
  state.markers = endMarkers(state.series.get("terminations")?.[0], state.series.get("truncations")?.[0]);
  if (state.compare && state.compare.ep === ep) state.compare = null;
  $("episode-title").textContent = `Episode ${ep.index} · ${ep.env ?? "unknown env"} · ${ep.length} steps · return ${fmtNum(ep.return)}` +
    (ep.end ? ` · ${ep.end}` : "") + (ep.subEnv !== null && ep.subEnv !== undefined ? ` · sub_env ${ep.subEnv}` : "") +
    (ep.legacy ? " · gym-recording" : "");
  $("scrub").max = String(ep.length);
  state.returnChart.setCursor(ep.index);
  state.lengthChart.setCursor(ep.index);
  state.agent = showPicker($("agent"), ep.multiagent, state.agent);
  renderTree(leaves);
  buildViews();
  await setStep(Math.max(0, Math.min(step, ep.length)), true);
  if (token === state.loadToken && !state.holdReady) document.body.dataset.state = "ready";
}

/** The groups of panels: chosen series leaves, rewards, then the infos' numbers. */
function panelGroups() {
  const groups = [], cmp = state.compare, names = state.episode.writer.actionNames;
  const add = (title, path, cols, extra = {}) => {
    const leaf = state.leaves.get(path);
    const dims = cols.length === 1 && !(leaf?.rowShape?.length) ? [title]
      : leaf ? columnNames(leaf, cols, state.episode.multiagent) : cols.map((_, j) => `${title}[${j}]`);
    groups.push({ title, names: dims, cols, compare: cmp ? cmp.series.get(path) : null, ...extra });
  };
  for (const leaf of state.leaves.values()) {
    if (!state.chosen.has(leaf.path) || leaf.kind !== "series") continue;
    const discrete = /^[<>|=]?[biu]/.test(leaf.dtype) || /^(bool|u?int)/.test(leaf.dtype);
    const named = leaf.path === "actions" && names;
    add(leaf.path, leaf.path, state.series.get(leaf.path),
      { step: discrete, yLabels: named ? names : null, yLabelStart: named ? state.episode.writer.actionStart : 0 });
  }
  if (state.series.has("rewards")) add("rewards", "rewards", state.series.get("rewards"));
  // Multi-agent recordings: each agent's rewards, one panel an agent (the picker's agent only).
  const ma = state.episode.multiagent, perAgent = state.series.get("observations/rewards");
  if (ma && perAgent && perAgent.length === ma.agents.length) {
    const shown = ma.agents.map((a, j) => [a, j]).filter(([a]) => !state.agent || a === state.agent);
    const cmpAgent = cmp ? cmp.series.get("observations/rewards") : null;
    groups.push({ title: "rewards by agent", names: shown.map(([a]) => a), cols: shown.map(([, j]) => perAgent[j]),
      compare: cmpAgent ? shown.map(([, j]) => cmpAgent[j]) : null });
  }
  if (state.infoSeries.size) {
    const keys = [...state.infoSeries.keys()];
    groups.push({ title: "infos", names: keys, cols: keys.map((k) => state.infoSeries.get(k)),
      compare: cmp ? keys.map((k) => cmp.infos.get(k)) : null });
  }
  return groups;
}

function buildViews() {
  const frames = $("frames");
  frames.innerHTML = "";
  state.players = [];
  for (const leaf of state.leaves.values()) {
    if (state.chosen.has(leaf.path) && leaf.kind === "image") state.players.push(new FramePlayer(leaf, frames));
  }
  $("views").hidden = !state.players.length;
  scaleFrames();
  state.charts = buildPanels($("charts"), panelGroups(), {
    view: state.view, markers: state.markers, hidden: state.hidden,
    compareLabel: state.compare ? `(episode ${state.compare.ep.index})` : "",
    onCursor: (i) => { pause(); setStep(i); },
    onZoom: (x0, x1, yZoom) => zoom(x0, x1, yZoom),
    onToggle: (name, on) => {
      if (on) state.hidden.delete(name); else state.hidden.add(name);
      for (const c of state.charts) {
        if (c.name !== name) continue;
        c.canvas.hidden = !on;
        if (on) { c.cursor = state.step; c.invalidate(); }
      }
    },
  });
  $("view-range").textContent = rangeText();
  $("compare-label").textContent = state.compare ? `compared with episode ${state.compare.ep.index} (dashed)` : "";
  scheduleURL();
}

function scaleFrames() {
  const sizes = state.players.map((p) => [p.w, p.h]);
  const scale = frameScale(state.frameScale, sizes, $("frames").clientWidth || 600);
  for (const p of state.players) p.setScale(scale);
}

function rangeText() {
  const v = state.view, whole = v.x0 <= 0 && v.x1 >= v.max;
  return whole ? `steps 0–${v.max} (all)` : `steps ${Math.round(v.x0)}–${Math.round(v.x1)} of ${v.max}`;
}

/** Shows steps [x0, x1] in every panel; the cursor (and so the frame) moves into that range. */
function zoom(x0, x1, yZoom = 1) {
  const v = state.view;
  v.x0 = Math.max(0, x0); v.x1 = Math.min(v.max, Math.max(x1, v.x0 + 1)); v.yZoom = yZoom;
  for (const c of state.charts) if (!c.canvas.hidden) c.invalidate();
  $("view-range").textContent = rangeText();
  scheduleURL();
  if (state.step < v.x0 || state.step > v.x1) setStep(Math.ceil(v.x0));
}

/** Overlays episode `index` on the panels (null: stop comparing). */
async function compareWith(index) {
  const ep = index === null || index === undefined ? null : state.rec.episodes[index];
  if (!ep || ep === state.episode) {
    state.compare = null;
    state.view.max = Math.max(state.steps, 1);
    state.view.x1 = Math.min(state.view.x1, state.view.max);
    state.view.x0 = Math.min(state.view.x0, state.view.x1 - 1);
    buildViews();
    for (const c of state.charts) c.setCursor(state.step);
    return;
  }
  const data = state.rec.episodeData(ep);
  const leaves = [...data.observations.values(), ...data.actions.values(), data.rewards].filter((l) => l.kind === "series" && l.rows);
  const [cols, infos] = await Promise.all([Promise.all(leaves.map((l) => l.readSeries())), infoSeries(data.infos).catch(() => new Map())]);
  state.compare = { ep, series: new Map(leaves.map((l, i) => [l.path, cols[i]])), infos };
  const whole = state.view.x0 <= 0 && state.view.x1 >= state.view.max;
  state.view.max = Math.max(state.steps, ep.length, 1);
  if (whole) state.view.x1 = state.view.max;   // (a zoom stays; the whole view grows to both)
  buildViews();
  for (const c of state.charts) c.setCursor(state.step);
}

function rowValues(path, k) {
  const cols = state.series.get(path);
  if (cols && cols.length === 0) return []; // rows of no elements (a Box of shape (0,))
  if (!cols || k >= cols[0].length) return undefined;
  const v = cols.map((c) => c[k]);
  return v.length === 1 && !(state.leaves.get(path)?.rowShape?.length) ? v[0] : v;
}

function actionName(v) {
  const names = state.episode.writer.actionNames;
  return names && typeof v === "number" ? names[v - state.episode.writer.actionStart] : undefined;
}

async function setStep(k, force = false) {
  if (!state.episode) return;
  k = Math.max(0, Math.min(k, state.steps));
  if (k === state.step && !force) return;
  state.step = k;
  $("scrub").value = String(k);
  $("step-label").textContent = `step ${k} / ${state.steps}`;
  for (const c of state.charts) { if (c.canvas.hidden) c.cursor = k; else c.setCursor(k); }
  scheduleURL();
  const shown = Promise.all(state.players.map((p) => p.show(k)));
  const at = { step: k };
  for (const leaf of state.leaves.values()) {
    if (leaf.kind === "series") at[leaf.path] = rowValues(leaf.path, k);
    else if (leaf.kind === "values") at[leaf.path] = leaf.values[k];
    else at[leaf.path] = `[${leaf.rowShape.join("×")}] ${dtypeName(leaf.dtype)}`;
  }
  if (k < state.steps) {
    at.reward = rowValues("rewards", k);
    at.terminated = Boolean(rowValues("terminations", k));
    at.truncated = Boolean(rowValues("truncations", k));
  }
  try {
    at.info = await state.data.infos.at(k);
  } catch (e) { at.info = `unreadable: ${e.message}`; }
  if (state.step !== k) { await shown; return; }
  $("info").innerHTML = Object.entries(at).map(([key, v]) => {
    const full = JSON.stringify(v) ?? "undefined", name = key === "actions" ? actionName(v) : undefined;
    return `<span class="kv" data-key="${esc(key)}" data-json="${esc(full)}" title="${esc(full)}">` +
      `<b>${esc(key)}</b>: ${esc(fmtValue(v))}${name !== undefined ? ` <i class="action-name">${esc(name)}</i>` : ""}</span>\n`;
  }).join("");
  await shown;
}

/** Per-dimension statistics over the filtered episodes (the table's rows), as a table. */
async function showStats() {
  const eps = state.rows.slice(0, MAX_STATS_EPISODES);
  $("stats").textContent = `reading ${eps.length} episodes…`;
  const rows = await dimensionStats(state.rec, eps);
  const head = "<tr><th>dimension</th><th>min</th><th>max</th><th>mean</th><th>std</th><th title='values counted (observations: steps + 1 an episode)'>values</th></tr>";
  const cell = (v) => `<td class="num" title="${v}">${fmtNum(v)}</td>`;
  $("stats").innerHTML = `<p>${eps.length} of ${state.rows.length} filtered episodes` +
    `${state.rows.length > eps.length ? ` (the first ${MAX_STATS_EPISODES})` : ""}</p>` +
    `<table class="stats">${head}${rows.map((r) => `<tr><td>${esc(r.name)}</td>${cell(r.min)}${cell(r.max)}` +
    `${cell(r.mean)}${cell(r.std)}<td class="num">${r.count}</td></tr>`).join("")}</table>`;
  state.stats = rows;
  document.body.dataset.stats = "shown";
}

function scheduleURL() {
  if (state.urlTimer) return;
  state.urlTimer = setTimeout(() => {
    state.urlTimer = null;
    if (!state.episode) return;
    const v = state.view, zoomed = v.x0 > 0 || v.x1 < v.max;
    history.replaceState(null, "", `?episode=${state.episode.index}&step=${state.step}` +
      (zoomed ? `&from=${Math.round(v.x0)}&to=${Math.round(v.x1)}` : "") +
      (state.compare ? `&compare=${state.compare.ep.index}` : ""));
  }, URL_UPDATE_MS);
}

// Playback runs through the steps the panels show (all of them unless zoomed).
function play() {
  if (!state.episode) return;
  const first = Math.ceil(state.view.x0), end = () => Math.min(state.steps, Math.floor(state.view.x1));
  if (state.step >= end() || state.step < first) setStep(first);
  state.playing = true;
  $("play").textContent = "❚❚";
  const tick = async () => {
    if (!state.playing) return;
    const t0 = performance.now();
    if (state.step >= end()) { pause(); return; }
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
  $("fit").addEventListener("click", () => zoom(0, state.view.max, 1));
  $("frame-scale").addEventListener("change", (ev) => { state.frameScale = ev.target.value; scaleFrames(); });
  $("compare").addEventListener("change", (ev) => {
    const v = ev.target.value.trim();
    compareWith(v === "" ? null : Number(v)).catch(showError);
  });
  $("stats-button").addEventListener("click", () => showStats().catch(showError));
  window.addEventListener("resize", () => {
    clearTimeout(state.resizeTimer);
    state.resizeTimer = setTimeout(() => { if (state.episode) { buildViews(); setStep(state.step, true); } }, 200);
  });
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
  await loaded;
  renderOverview();
  if (!state.rec.episodes.length) { document.body.dataset.state = "ready"; $("episode-title").textContent = "No episodes yet"; return; }
  const num = (key) => (params.has(key) ? parseInt(params.get(key), 10) : NaN);
  state.holdReady = ["compare", "from", "to"].some((k) => params.has(k));  // (ready once applied)
  await selectEpisode(Math.min(episode, state.rec.episodes.length - 1), step);
  // A shared link's comparison and zoom (?compare=K&from=A&to=B), when they still apply.
  if (Number.isInteger(num("compare")) && state.rec.episodes[num("compare")]) {
    $("compare").value = String(num("compare"));
    await compareWith(num("compare"));
  }
  if (Number.isInteger(num("from")) && Number.isInteger(num("to")) && num("to") > num("from")) {
    const keep = state.step;
    zoom(num("from"), num("to"), 1);
    if (keep >= state.view.x0 && keep <= state.view.x1) await setStep(keep, true);
  }
  if (state.holdReady) { state.holdReady = false; document.body.dataset.state = "ready"; }
}

main().catch(showError);
