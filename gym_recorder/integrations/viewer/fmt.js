// fmt.js: numbers and dtypes as people read them (the exact value stays available on hover).

const SIGNIFICANT = 4;   // significant digits shown
const DTYPE_NAMES = {
  b1: "bool", i1: "int8", u1: "uint8", i2: "int16", u2: "uint16", i4: "int32", u4: "uint32",
  i8: "int64", u8: "uint64", f2: "float16", f4: "float32", f8: "float64", c8: "complex64",
  c16: "complex128",
};

/** A number with SIGNIFICANT significant digits (integers whole, huge or tiny ones as 1.2e+9). */
export function fmtNum(v) {
  if (typeof v === "bigint") return String(v);
  if (typeof v !== "number") return String(v);
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(SIGNIFICANT - 1).replace(/\.?0+e/, "e");
  return String(Number(v.toPrecision(SIGNIFICANT)));
}

/** A JSON-able value with its numbers shortened (arrays and objects kept, for one line). */
export function fmtValue(v, depth = 0) {
  if (typeof v === "number" || typeof v === "bigint") return fmtNum(v);
  if (v === null || v === undefined || typeof v !== "object" || depth > 8) return JSON.stringify(v) ?? String(v);
  if (Array.isArray(v)) return `[${v.map((x) => fmtValue(x, depth + 1)).join(", ")}]`;
  return `{${Object.keys(v).map((k) => `${JSON.stringify(k)}: ${fmtValue(v[k], depth + 1)}`).join(", ")}}`;
}

/** numpy's dtype name for a dtype string: "<f8" -> "float64", "|u1" -> "uint8", "<U7" -> "str7". */
export function dtypeName(text) {
  if (typeof text !== "string") return String(text);
  const m = /^[<>|=]?([biufcUS])([0-9]+)$/.exec(text);
  if (!m) return text;   // already a name (legacy files: "float32")
  if (m[1] === "U") return `str${m[2]}`;
  if (m[1] === "S") return `bytes${m[2]}`;
  return DTYPE_NAMES[m[1] + m[2]] || text;
}

/** Text as HTML (for names taken from a recording: never markup). */
export function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
