// data.js: the recording as the page sees it, read from the raw files the server hands out.
//
// Manifests -> writers (ordered as RecordingReader orders them: legacy first, then by creation
// time, then prefix) -> episodes (entries joined by their "episode" number, parts in entry order)
// -> leaves (one per observation/action tree leaf) whose rows are read with HTTP Range requests
// and decoded by decode.js. Nothing is converted by the server.

import { decodeArray, checkRef, valueAt } from "./decode.js";

const LEGACY_PREFIX = "openaigym.trace.";
const MANIFEST_SUFFIX = ".manifest.json";
// How deep a TREE or VALUE may nest (the format's MAX_NESTING; deeper is refused, not recursed).
const MAX_NESTING = 64;
// Refs of one batch's rewards are fetched with one request when they lie this close together.
const COALESCE_SLACK = 4096;
// Parallel requests while loading batch files (browsers allow about six per host anyway).
const PARALLEL = 6;
// The format's MAX_JSON_BYTES: a larger manifest or batch is refused before its body is read.
const MAX_JSON_BYTES = 2 ** 28;

export class ViewerError extends Error {}

/** Counts what was fetched, for the page's status line and the benchmarks. */
export const stats = { requests: 0, bytes: 0, timings: {} };

async function fetchJSON(url, expectedSize = undefined) {
  stats.requests++;
  const r = await fetch(url, { cache: "no-store" });
  if (!r.ok) throw new ViewerError(`${url}: HTTP ${r.status}`);
  const length = Number(r.headers.get("Content-Length"));
  if (length > MAX_JSON_BYTES) {
    r.body?.cancel();
    throw new ViewerError(`${url}: ${length} bytes of JSON is more than ${MAX_JSON_BYTES}`);
  }
  const bytes = await r.arrayBuffer();
  stats.bytes += bytes.byteLength;
  if (Number.isInteger(expectedSize) && bytes.byteLength !== expectedSize) {
    throw new ViewerError(`${url}: ${bytes.byteLength} bytes, the manifest says ${expectedSize} (changed or truncated?)`);
  }
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch (e) {
    throw new ViewerError(`${url}: not valid UTF-8`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ViewerError(`${url}: not valid JSON (${e.message})`);
  }
}

function fileURL(name) {
  if (typeof name !== "string" || !name || name.includes("/") || name.includes("\\") || name === "." || name === "..") {
    throw new ViewerError(`bad file name ${JSON.stringify(name)}`);
  }
  return "/recording/" + encodeURIComponent(name);
}

/** The bytes [start, end) of a recording file, as an ArrayBuffer. */
export async function fetchRange(name, start, end) {
  if (end <= start) return new ArrayBuffer(0);
  stats.requests++;
  const r = await fetch(fileURL(name), { headers: { Range: `bytes=${start}-${end - 1}` } });
  if (r.status !== 206 && r.status !== 200) throw new ViewerError(`${name}: HTTP ${r.status} for bytes ${start}-${end}`);
  let buf = await r.arrayBuffer();
  if (r.status === 200) buf = buf.slice(start, end);
  stats.bytes += buf.byteLength;
  if (buf.byteLength !== end - start) {
    throw new ViewerError(`${name}: expected ${end - start} bytes at ${start}, got ${buf.byteLength} (file truncated?)`);
  }
  return buf;
}

async function inParallel(items, fn) {
  const out = new Array(items.length);
  let next = 0;
  async function worker() {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  }
  await Promise.all(Array.from({ length: Math.min(PARALLEL, items.length) }, worker));
  return out;
}

function isRef(x) {
  return x !== null && typeof x === "object" && !Array.isArray(x) && x.__type === "ndarray";
}

function rowBytesOf(ref) {
  const [dt, shape] = checkRef(ref);
  return shape.slice(1).reduce((a, b) => a * b, dt.itemsize);
}

/** A leaf of an observation/action tree: its rows over all parts of an episode. */
export class Leaf {
  constructor(path) {
    this.path = path;       // e.g. "observations/nested/pair/0"
    this.dtype = null;
    this.rowShape = null;   // shape of one row
    this.rows = 0;
    this.segments = [];     // {file, off, rows, rowBytes} consecutive rows in one file
    this.values = null;     // for leaves stored as VALUEs: one JSON value a row
  }

  addRef(ref, rows = undefined, where = "") {
    const [dt, shape] = checkRef(ref);
    if (shape.length === 0) throw new ViewerError(`${this.path}: a leaf array needs a row axis`);
    if (rows !== undefined && shape[0] !== rows) throw new ViewerError(`${where}${this.path}: ${shape[0]} rows, the entry has ${rows}`);
    const rowShape = shape.slice(1);
    if (this.dtype === null) {
      this.dtype = ref.dtype; this.rowShape = rowShape;
    } else if (this.dtype !== ref.dtype || rowShape.join() !== this.rowShape.join()) {
      // Parts may widen a dtype; the page keeps it simple and shows the first part's kind.
      this.mixed = true;
    }
    this.segments.push({ file: ref.npyfile, off: ref.npyoff, rows: shape[0], rowBytes: rowBytesOf(ref), ref });
    this.rows += shape[0];
  }

  addValues(values) {
    this.values = (this.values || []).concat(values);
    this.rows += values.length;
  }

  get rowSize() { return this.rowShape ? this.rowShape.reduce((a, b) => a * b, 1) : 1; }

  /** "image" (uint8 H x W x 3|4 or H x W), "series" (few numbers a row), "values" or "big". */
  get kind() {
    if (this.values !== null && this.segments.length === 0) return "values";
    const s = this.rowShape;
    if (/^\|?u1$|^uint8$/.test(this.dtype) && (s.length === 2 || (s.length === 3 && (s[2] === 3 || s[2] === 4)))) return "image";
    if (/U|S/.test(this.dtype)) return "values";
    return this.rowSize <= 64 ? "series" : "big";
  }

  /** Decodes rows [a, b) (one Range request per segment touched). */
  async readRows(a, b) {
    const parts = [];
    let row0 = 0;
    for (const seg of this.segments) {
      const lo = Math.max(a, row0), hi = Math.min(b, row0 + seg.rows);
      if (lo < hi && seg.ref.codec !== undefined && seg.ref.codec !== null) {
        // A compressed segment: decoded whole once (a few chunks of frames), then sliced.
        if (!this._decoded) this._decoded = new Map();
        let whole = this._decoded.get(seg);
        if (whole === undefined) {
          const stored = checkRef(seg.ref)[4];
          whole = decodeArray(seg.ref, await fetchRange(seg.file, seg.off, seg.off + stored), seg.off);
          if (this._decoded.size >= 2) this._decoded.delete(this._decoded.keys().next().value);
          this._decoded.set(seg, whole);
        }
        const per = whole.data.length / seg.rows;
        parts.push({ ...whole, shape: [hi - lo, ...whole.shape.slice(1)],
                     data: whole.data.slice((lo - row0) * per, (hi - row0) * per) });
      } else if (lo < hi) {
        const start = seg.off + (lo - row0) * seg.rowBytes, size = (hi - lo) * seg.rowBytes;
        const ref = { __type: "ndarray", shape: [hi - lo, ...seg.ref.shape.slice(1)], order: "C",
          dtype: seg.ref.dtype, npyfile: seg.file, npyoff: start, size };
        const buf = await fetchRange(seg.file, start, start + size);
        parts.push(decodeArray(ref, buf, start));
      }
      row0 += seg.rows;
    }
    return parts;
  }

  /** All rows as one Float64Array per element of a row (for charts). */
  async readSeries() {
    const n = this.rowSize, cols = Array.from({ length: n }, () => new Float64Array(this.rows));
    if (n === 0) return cols; // rows of no elements: nothing to read (nor to loop over)
    let r = 0;
    for (const part of await this.readRows(0, this.rows)) {
      const d = part.data, rows = part.shape[0];
      if (part.complex) {
        for (let i = 0; i < rows; i++) for (let j = 0; j < n; j++) cols[j][r + i] = d[2 * (i * n + j)];
      } else {
        for (let i = 0; i < rows; i++) for (let j = 0; j < n; j++) cols[j][r + i] = valueAt(d, i * n + j);
      }
      r += rows;
    }
    return cols;
  }
}

/** Walks a TREE, calling leaf(pathPart[], node) for each ARRAY or values leaf. */
function walkTree(node, path, fn, depth = 0) {
  if (depth > MAX_NESTING) throw new ViewerError(`${path.join("/")}: nested too deeply`);
  if (isRef(node) || (node && typeof node === "object" && node.__type === "values")) fn(path, node);
  else if (Array.isArray(node)) node.forEach((v, i) => walkTree(v, path.concat(String(i)), fn, depth + 1));
  else if (node && typeof node === "object") for (const k of Object.keys(node)) walkTree(node[k], path.concat(k), fn, depth + 1);
  else fn(path, { __type: "values", values: [node] });
}

/** Legacy (gym-recording) trees: ARRAY, list of same-shaped ARRAYs (one a row), list of numbers. */
function walkLegacy(node, path, fn) {
  if (Array.isArray(node) && node.length && node.every(isRef)) fn(path, { rowRefs: node });
  else if (Array.isArray(node) && node.every((x) => typeof x === "number" || typeof x === "boolean")) fn(path, { __type: "values", values: node });
  else if (isRef(node)) fn(path, node);
  else if (node && typeof node === "object" && !Array.isArray(node)) for (const k of Object.keys(node)) walkLegacy(node[k], path.concat(k), fn);
  else fn(path, { __type: "values", values: Array.isArray(node) ? node : [node] });
}

// rows: what the entry's steps say each array of the tree holds (undefined for legacy files)
function addToLeaves(leaves, kind, entry, legacy, rows, where) {
  const walk = legacy ? walkLegacy : walkTree;
  walk(entry[kind], [kind], (path, node) => {
    const key = path.join("/");
    if (!leaves.has(key)) leaves.set(key, new Leaf(key));
    const leaf = leaves.get(key);
    if (node.rowRefs) {
      for (const r of node.rowRefs) leaf.addRef({ ...r, shape: [1, ...r.shape], size: r.size === undefined ? undefined : r.size });
    } else if (isRef(node)) {
      if (legacy && node.shape.length === 2 && node.shape[0] === 1 && node.shape[1] === 0) return; // np.array([[]])
      leaf.addRef(node, rows, where);
    } else leaf.addValues(Array.isArray(node.values) ? node.values : []);
  });
}

/** A version 2 manifest's "multiagent" ({api, agents}: PettingZoo recordings), checked; null
 * for a single-agent one (see "Multi-agent recordings" in the format spec). */
function multiAgentOf(name, doc) {
  const ma = doc.multiagent;
  // (version 2 also marks compressed arrays and compactions: only version 1 may not have it)
  if (ma !== undefined && doc.version !== 2) throw new ViewerError(`${name}: format version ${doc.version} with 'multiagent'`);
  if (ma === undefined) return null;
  const agents = ma && Array.isArray(ma.agents) ? ma.agents : null;
  if (!ma || !["parallel", "aec"].includes(ma.api) || !agents || !agents.length
      || !agents.every((a) => typeof a === "string") || new Set(agents).size !== agents.length) {
    throw new ViewerError(`${name}: 'multiagent' must have api "parallel" or "aec" and distinct agent names`);
  }
  return { api: ma.api, agents };
}

/** One writer: its manifest and batches. */
class Writer {
  constructor(name, doc) {
    if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw new ViewerError(`${name}: a manifest must be a JSON object`);
    this.name = name;
    this.legacy = !("format" in doc) && !("version" in doc);
    if (this.legacy && !name.startsWith(LEGACY_PREFIX)) throw new ViewerError(`${name}: no format/version and not a gym-recording manifest`);
    if (!this.legacy && doc.format !== "gym_recorder") throw new ViewerError(`${name}: format is ${JSON.stringify(doc.format)}`);
    if (!this.legacy && doc.version > 2) throw new ViewerError(`${name}: format version ${doc.version} is newer than this viewer`);
    this.multiagent = this.legacy ? null : multiAgentOf(name, doc);
    this.prefix = name.slice(0, -MANIFEST_SUFFIX.length);
    this.created = (!this.legacy && typeof doc.created === "string") ? doc.created : "";
    this.envId = (!this.legacy && typeof doc.env_id === "string") ? doc.env_id : null;
    // Optional names of a Discrete space's actions (for showing only; ignored when malformed).
    const names = this.legacy ? null : doc.action_names, space = this.legacy ? null : doc.action_space;
    this.actionNames = Array.isArray(names) && names.length <= 4096 && names.every((x) => typeof x === "string") &&
      space && space.type === "Discrete" && space.n === names.length ? names : null;
    this.actionStart = this.actionNames && Number.isSafeInteger(space.start) ? space.start : 0;
    this.doc = doc;
    if (!Array.isArray(doc.batches)) throw new ViewerError(`${name}: 'batches' must be a list`);
    this.batches = doc.batches;
  }
}

/** A whole recording directory, as served under /recording/. */
export class Recording {
  constructor() {
    this.writers = [];
    this.episodes = [];
    this._batchCache = new Map();   // batch file name + size -> parsed JSON (batches never change)
    this._returnCache = new Map();  // batch file name -> rewards sums by entry position
  }

  async _batch(b) {
    const key = `${b.fn}:${b.json_size}`;
    if (!this._batchCache.has(key)) {
      const doc = await fetchJSON(fileURL(b.fn), b.json_size);
      if (!doc || typeof doc !== "object" || !Array.isArray(doc.episodes)) throw new ViewerError(`${b.fn}: no 'episodes' list`);
      this._batchCache.set(key, doc);
    }
    return this._batchCache.get(key);
  }

  /** (Re)reads the manifests and every listed batch JSON, then the episodes' returns. */
  async load() {
    const names = await fetchJSON("/api/manifests");
    if (!Array.isArray(names)) throw new ViewerError("/api/manifests: not a list");
    // Episodes edits deleted, per writer: [[start, stop], ...] of its episode numbers.
    const deleted = await fetchJSON("/api/edits");
    const docs = await inParallel(names, (n) => fetchJSON(fileURL(n)));
    const writers = names.map((n, i) => new Writer(n, docs[i]));
    writers.sort((a, b) => (a.legacy === b.legacy ? 0 : a.legacy ? -1 : 1)
      || (a.created < b.created ? -1 : a.created > b.created ? 1 : 0)
      || (a.prefix < b.prefix ? -1 : a.prefix > b.prefix ? 1 : 0));
    // Short labels in that order ("w1", "w2"...): writers that start later get the next ones.
    writers.forEach((w, i) => { w.label = `w${i + 1}`; });
    const jobs = [];
    for (const w of writers) for (const b of w.batches) jobs.push(b);
    stats.timings.manifests = performance.now();
    const batchDocs = await inParallel(jobs, async (b) => {
      const doc = await this._batch(b);
      await this._batchReturns(b, doc);
      return doc;
    });
    stats.timings.batches = performance.now();
    const episodes = [];
    let j = 0;
    for (const w of writers) {
      const open = new Map();
      const ranges = (deleted && Array.isArray(deleted[w.prefix])) ? deleted[w.prefix] : [];
      let number = 0;
      for (const b of w.batches) {
        const doc = batchDocs[j++];
        doc.episodes.forEach((entry, pos) => {
          const part = { batch: b, entry, pos };
          if (w.legacy || entry.part === 0 || entry.part === undefined) {
            const gone = ranges.some((r) => r[0] <= number && number < r[1]);
            number++;
            if (gone) {
              if (!w.legacy) open.set(entry.episode, null);  // its later parts are skipped too
              return;
            }
            const ep = { index: episodes.length, writer: w, parts: [part], legacy: w.legacy };
            episodes.push(ep);
            if (!w.legacy) open.set(entry.episode, ep);
          } else {
            const ep = open.get(entry.episode);
            if (ep === null) return;  // deleted by an edit
            if (ep === undefined) throw new ViewerError(`${b.fn}: part ${entry.part} of episode ${entry.episode} without its start`);
            ep.parts.push(part);
          }
        });
      }
    }
    for (const ep of episodes) {
      summarise(ep);
      let total = 0;
      for (const p of ep.parts) total += this._returnCache.get(`${p.batch.fn}:${p.batch.json_size}`).get(p.pos) || 0;
      ep.return = total;
    }
    this.writers = writers;
    this.episodes = episodes;
    stats.timings.episodes = performance.now();
    return this;
  }

  /** Sums the rewards of every entry of a batch: one Range request per run of nearby refs. */
  async _batchReturns(b, doc) {
    const key = `${b.fn}:${b.json_size}`;
    if (this._returnCache.has(key)) return;
    const refs = [];
    const sums = new Map();
    doc.episodes.forEach((entry, pos) => {
      const r = entry.rewards;
      if (isRef(r)) {
        if (r.shape.length === 2 && r.shape[0] === 1 && r.shape[1] === 0) sums.set(pos, 0); // legacy np.array([[]])
        else refs.push([pos, r, checkRef(r)[4]]);
      } else if (Array.isArray(r)) sums.set(pos, r.reduce((a, x) => a + Number(x), 0));
      else sums.set(pos, 0);
    });
    refs.sort((x, y) => (x[1].npyfile < y[1].npyfile ? -1 : x[1].npyfile > y[1].npyfile ? 1 : x[1].npyoff - y[1].npyoff));
    let i = 0;
    while (i < refs.length) {
      const file = refs[i][1].npyfile, start = refs[i][1].npyoff;
      let end = start + refs[i][2], k = i + 1;
      while (k < refs.length && refs[k][1].npyfile === file && refs[k][1].npyoff <= end + COALESCE_SLACK) {
        end = Math.max(end, refs[k][1].npyoff + refs[k][2]);
        k++;
      }
      const buf = await fetchRange(file, start, end);
      for (let q = i; q < k; q++) {
        const [pos, ref] = refs[q];
        const d = decodeArray(ref, buf, start).data;
        let total = 0;
        for (let j = 0; j < d.length; j++) total += valueAt(d, j);
        sums.set(pos, total);
      }
      i = k;
    }
    this._returnCache.set(key, sums);
  }

  /** The leaves, rewards and infos of one episode (arrays are read on demand). */
  episodeData(ep) {
    const obs = new Map(), act = new Map(), rewards = new Leaf("rewards");
    const term = new Leaf("terminations"), trunc = new Leaf("truncations");
    for (const { entry, batch } of ep.parts) {
      // An entry's arrays hold as many rows as its steps say (part 0's observations one more).
      let steps;
      if (!ep.legacy) {
        if (!Number.isSafeInteger(entry.steps) || entry.steps < 0) throw new ViewerError(`${batch.fn}: 'steps' must be a non-negative integer`);
        steps = entry.steps;
      }
      const where = `${batch.fn} entry ${entry.index}: `;
      addToLeaves(obs, "observations", entry, ep.legacy, steps === undefined ? undefined : steps + (entry.part === 0 ? 1 : 0), where);
      addToLeaves(act, "actions", entry, ep.legacy, steps, where);
      if (isRef(entry.rewards) && !(entry.rewards.shape.length === 2 && entry.rewards.shape[1] === 0)) rewards.addRef(entry.rewards, steps, where);
      else if (Array.isArray(entry.rewards)) rewards.addValues(entry.rewards);
      if (isRef(entry.terminations)) term.addRef(entry.terminations, steps, where);
      if (isRef(entry.truncations)) trunc.addRef(entry.truncations, steps, where);
    }
    return { observations: obs, actions: act, rewards, terminations: term, truncations: trunc,
      infos: new Infos(ep.parts) };
  }
}

function summarise(ep) {
  const first = ep.parts[0].entry, last = ep.parts[ep.parts.length - 1].entry;
  ep.writerName = ep.writer.prefix;
  ep.writerLabel = ep.writer.label;
  ep.env = ep.writer.envId;
  ep.multiagent = ep.writer.multiagent;
  if (ep.legacy) {
    const o = first.observations;
    const rows = isRef(o) ? (o.shape[0] || 0) : Array.isArray(o) ? o.length : 0;
    ep.length = Math.max(rows - 1, 0);
    ep.end = null; ep.seed = null; ep.subEnv = null;
  } else {
    ep.length = ep.parts.reduce((a, p) => a + (Number.isInteger(p.entry.steps) ? p.entry.steps : 0), 0);
    ep.end = last.continues === true ? null : (last.end ?? null);
    ep.seed = Number.isInteger(first.seed) ? first.seed : null;
    ep.subEnv = Number.isInteger(first.sub_env) ? first.sub_env : null;
  }
}

/** The info dicts of an episode (INFOS of each part, rows concatenated). */
class Infos {
  constructor(parts) {
    this.parts = [];
    let row0 = 0;
    for (const { entry, batch } of parts) {
      const inf = entry.infos;
      if (!inf || typeof inf !== "object" || !Array.isArray(inf.keys)) continue;
      if (!Number.isSafeInteger(inf.rows) || inf.rows < 0) throw new ViewerError(`${batch.fn} entry ${entry.index}: infos 'rows' must be a non-negative integer`);
      this.parts.push({ row0, rows: inf.rows, keys: inf.keys, loaded: null, where: `${batch.fn} entry ${entry.index} infos` });
      row0 += inf.rows;
    }
    this.rows = row0;
  }

  async _load(part) {
    if (part.loaded) return part.loaded;
    part.loaded = await Promise.all(part.keys.map(async (col) => {
      const out = { key: col.key, index: null, values: null, kind: col.kind, pytype: col.pytype, rowSize: 1 };
      if (isRef(col.index)) out.index = (await readRef(col.index)).data;
      if (col.kind === "array" && isRef(col.values)) {
        const arr = await readRef(col.values), present = out.index ? out.index.length : part.rows;
        // one row of values a row the key is in (else a row of 2**32 elements could hang the tab)
        if (arr.shape[0] !== present) throw new ViewerError(`${part.where} ${JSON.stringify(col.key)}: ${arr.shape[0]} rows of values for ${present}`);
        out.values = arr; out.rowSize = arr.shape.slice(1).reduce((a, b) => a * b, 1);
      } else out.values = Array.isArray(col.values) ? col.values : [];
      return out;
    }));
    return part.loaded;
  }

  /** Every part's columns, loaded: [{row0, rows, columns: [{key, index, values, kind, rowSize}]}]. */
  async loadAll() {
    return Promise.all(this.parts.map(async (p) => ({ row0: p.row0, rows: p.rows, columns: await this._load(p) })));
  }

  /** The info dict at row r, as plain JSON-able values. */
  async at(r) {
    const part = this.parts.find((p) => r >= p.row0 && r < p.row0 + p.rows);
    if (!part) return {};
    // (no prototype: an info key "__proto__" is a key like any other)
    const row = r - part.row0, out = Object.create(null);
    for (const col of await this._load(part)) {
      let pos = row;
      if (col.index) {
        pos = -1;
        for (let i = 0; i < col.index.length; i++) if (Number(col.index[i]) === row) { pos = i; break; }
        if (pos < 0) continue;
      }
      if (col.kind === "array") {
        const d = col.values.data, n = col.rowSize;
        const items = Array.from({ length: n }, (_, j) => valueAt(d, pos * n + j));
        out[col.key] = col.values.shape.length === 1 ? items[0] : items;
      } else out[col.key] = plainValue(col.values[pos]);
    }
    return out;
  }
}

async function readRef(ref) {
  const [, , , off, size] = checkRef(ref);
  return decodeArray(ref, await fetchRange(ref.npyfile, off, off + size), off);
}

/** A VALUE as something JSON.stringify shows well (arrays inside stay references). */
export function plainValue(v, depth = 0) {
  if (depth > MAX_NESTING || v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) return v.map((x) => plainValue(x, depth + 1));
  switch (v.__type) {
    case "float": return v.value;
    case "scalar": return v.value;
    case "tuple": return (v.items || []).map((x) => plainValue(x, depth + 1));
    case "dict": return Object.fromEntries((v.items || []).map(([k, x]) => [JSON.stringify(plainValue(k)), plainValue(x, depth + 1)]));
    case "bytes": return `bytes(${v.base64})`;
    case "ndarray": return `ndarray ${v.dtype} [${v.shape}]`;
    case "graph": return "graph";
    case undefined: return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plainValue(x, depth + 1)]));
    default: return v;
  }
}
