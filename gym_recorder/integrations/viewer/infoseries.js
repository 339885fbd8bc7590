// infoseries.js: the numbers in an episode's infos as series, one a numeric leaf.
//
// An info key whose values are numbers (Python or numpy scalars, bools, small numpy arrays, or
// dicts / lists holding such) becomes the series "infos/KEY" (and "infos/KEY/SUB", "infos/KEY[j]"
// for the leaves inside), one value per info row (row 0 is reset's info, row k the info of step
// k - 1's result: the observations' axis); NaN where the key is absent or not a number.

import { valueAt } from "./decode.js";

const MAX_INFO_SERIES = 64;     // series made from one episode's infos at most
const MAX_ELEMENTS = 16;        // an array (numpy or list) of more elements is not charted
const MAX_DEPTH = 8;            // nesting followed inside a VALUE

/** A VALUE as a number, or undefined if it is not one. */
function numberOf(v) {
  if (typeof v === "number") return v;
  if (typeof v === "boolean") return v ? 1 : 0;
  if (v && typeof v === "object" && (v.__type === "float" || v.__type === "scalar")) {
    const x = v.value;
    if (typeof x === "number") return x;
    if (typeof x === "boolean") return x ? 1 : 0;
    if (x === "nan") return NaN;
    if (x === "inf") return Infinity;
    if (x === "-inf") return -Infinity;
  }
  return undefined;
}

/** Calls put(name, number) for each numeric leaf of a VALUE. */
function leaves(v, name, put, depth = 0) {
  const x = numberOf(v);
  if (x !== undefined) { put(name, x); return; }
  if (depth > MAX_DEPTH || v === null || typeof v !== "object") return;
  const items = Array.isArray(v) ? v : v.__type === "tuple" ? v.items : null;
  if (Array.isArray(items)) {
    if (items.length <= MAX_ELEMENTS) items.forEach((it, j) => leaves(it, `${name}[${j}]`, put, depth + 1));
  } else if (v.__type === "dict" && Array.isArray(v.items)) {
    for (const kv of v.items) if (Array.isArray(kv) && typeof kv[0] === "string") leaves(kv[1], `${name}/${kv[0]}`, put, depth + 1);
  } else if (v.__type === undefined) {
    for (const k of Object.keys(v)) leaves(v[k], `${name}/${k}`, put, depth + 1);
  }
}

/** Map of series name -> Float64Array (infos.rows values), in key order. */
export async function infoSeries(infos) {
  const out = new Map();
  const put = (name, row, x) => {
    let s = out.get(name);
    if (!s) {
      if (out.size >= MAX_INFO_SERIES) return;
      s = new Float64Array(infos.rows).fill(NaN);
      out.set(name, s);
    }
    s[row] = x;
  };
  for (const part of await infos.loadAll()) {
    for (const col of part.columns) {
      if (typeof col.key !== "string") continue;
      const name = `infos/${col.key}`, rowOf = (i) => part.row0 + (col.index ? Number(col.index[i]) : i);
      if (col.kind === "array") {
        const arr = col.values, d = arr && arr.data, n = col.rowSize;
        if (!d || arr.complex || Array.isArray(d) || n > MAX_ELEMENTS || n === 0) continue;
        const rows = arr.shape[0];
        for (let i = 0; i < rows; i++) {
          for (let j = 0; j < n; j++) put(arr.shape.length === 1 ? name : `${name}[${j}]`, rowOf(i), valueAt(d, i * n + j));
        }
      } else if (Array.isArray(col.values)) {
        col.values.forEach((v, i) => leaves(v, name, (leaf, x) => put(leaf, rowOf(i), x)));
      }
    }
  }
  return out;
}
