// table.js: the episode table's rows (filter, sort, HTML) and the leaf tree, as plain functions.

import { fmtNum, dtypeName, esc } from "./fmt.js";

/** Whether an episode passes the filter: text, or "key OP value" (length>100, sub_env=2...). */
export function matches(ep, filter) {
  if (!filter) return true;
  const m = /^\s*(index|length|return|seed|end|env|writer|sub_env|outlier)\s*(<=|>=|!=|=|<|>)\s*(.+?)\s*$/.exec(filter);
  if (m) {
    const key = { writer: "writerName", sub_env: "subEnv" }[m[1]] || m[1], op = m[2], w = m[3];
    let v = ep[key];
    if (key === "writerName" && w === ep.writerLabel) v = w;
    if (key === "outlier") v = ep.outlier ? 1 : 0;
    const num = Number(w), a = typeof v === "number" && !Number.isNaN(num) ? v : String(v);
    const b = typeof a === "number" ? num : w;
    return { "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b, "=": a === b, "!=": a !== b }[op];
  }
  const text = `${ep.index} ${ep.writerLabel} ${ep.writerName} ${ep.env} ${ep.length} ${fmtNum(ep.return)} ${ep.end} ${ep.seed}`;
  return text.toLowerCase().includes(filter.toLowerCase());
}

/** The episodes that pass `filter`, sorted by `key` (dir 1 or -1; ties and nulls by index). */
export function filteredSorted(episodes, filter, key, dir) {
  const rows = episodes.filter((ep) => matches(ep, filter));
  rows.sort((a, b) => {
    const x = a[key], y = b[key];
    if (x === y) return a.index - b.index;
    if (x === null || x === undefined) return 1;
    if (y === null || y === undefined) return -1;
    return (x < y ? -1 : 1) * dir;
  });
  return rows;
}

/** One table row (the writer's label, its full prefix on hover; exact return on hover). */
export function rowHTML(ep, selected) {
  return `<tr data-index="${ep.index}" class="${ep.index === selected ? "selected" : ""}${ep.outlier ? " outlier" : ""}"` +
    `${ep.outlier ? ` title="outlier: ${esc(ep.outlier)}"` : ""}><td class="num">${ep.index}</td>` +
    `<td title="${esc(ep.writerName)}">${esc(ep.writerLabel)}</td><td>${esc(ep.env ?? "")}</td>` +
    `<td class="num">${ep.length}</td><td class="num" data-value="${ep.return}" title="${ep.return}">${fmtNum(ep.return)}</td>` +
    `<td>${esc(ep.end ?? "")}</td><td class="num">${ep.seed ?? ""}</td><td class="num">${ep.subEnv ?? ""}</td></tr>`;
}

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

/** The leaf tree as nested lists, a checkbox for each series or image leaf (ticked if chosen). */
export function treeHTML(leaves, chosen) {
  const html = (node, name) => {
    const kids = Object.keys(node);
    let out = "<li>";
    if (node[LEAF]) {
      const leaf = leaves.get(node[LEAF]), kind = leaf.kind;
      const shape = leaf.rowShape ? `[${leaf.rowShape.join("×")}] ${dtypeName(leaf.dtype)}` : "values";
      const box = kind === "series" || kind === "image"
        ? `<input type="checkbox" data-leaf="${esc(leaf.path)}"${chosen.has(leaf.path) ? " checked" : ""}>` : "";
      out += `<label title="${esc(leaf.path)}">${box}${esc(name)} <small>${esc(shape)}${kind === "image" ? " image" : ""}</small></label>`;
    } else out += `<span>${esc(name)}</span>`;
    if (kids.length) out += "<ul>" + kids.map((k) => html(node[k], k)).join("") + "</ul>";
    return out + "</li>";
  };
  const tree = leafTree([...leaves.keys()]);
  return "<ul>" + Object.keys(tree).map((k) => html(tree[k], k)).join("") + "</ul>";
}
