// decode.js: decode gym_recorder array references from the raw bytes of a .bin file.
//
// The format (gym_recorder/format.py) stores every array as a reference
//   {"__type": "ndarray", "shape": [...], "order": "C", "dtype": "<f4",
//    "npyfile": "P.epNNNNNNNNN.bin", "npyoff": 0, "size": 16, "crc32": ...}
// into the batch's .bin file: `size` bytes at `npyoff`, the array in C order, dtype as numpy's
// dtype.str (byte order <, > or |, kind, item size). This module has no dependencies and runs in
// browsers and in Node (ES module).
//
//   decodeArray(ref, buffer[, base]) -> {dtype, shape, data}
//
// `buffer` is an ArrayBuffer with the .bin file's bytes from file offset `base` (default 0: the
// whole file). `data` is a typed array of the values in C order: Uint8Array for bool,
// Int8/16/32Array, Uint8/16/32Array, BigInt64Array/BigUint64Array for 64-bit ints,
// Float32Array for float16 and float32, Float64Array for float64; for complex dtypes (c8, c16)
// a Float32Array/Float64Array of interleaved (real, imag) pairs (`complex: true` is set);
// for unicode (U) and byte strings (S) an Array of strings (trailing NULs removed, as numpy does).
// Anything wrong with the reference (bad shape, size, offset out of bounds, unknown dtype)
// throws an Error whose message names the problem.

const LITTLE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

// Names that OpenAI gym-recording's files use (numpy's str(dtype)), all native order.
const LEGACY_NAMES = {
  bool: "|b1", int8: "|i1", uint8: "|u1", int16: "=i2", uint16: "=u2", int32: "=i4",
  uint32: "=u4", int64: "=i8", uint64: "=u8", float16: "=f2", float32: "=f4", float64: "=f8",
  complex64: "=c8", complex128: "=c16",
};

const NUMERIC = {
  b1: [Uint8Array, 1, "getUint8"],
  i1: [Int8Array, 1, "getInt8"],
  u1: [Uint8Array, 1, "getUint8"],
  i2: [Int16Array, 2, "getInt16"],
  u2: [Uint16Array, 2, "getUint16"],
  i4: [Int32Array, 4, "getInt32"],
  u4: [Uint32Array, 4, "getUint32"],
  i8: [BigInt64Array, 8, "getBigInt64"],
  u8: [BigUint64Array, 8, "getBigUint64"],
  f4: [Float32Array, 4, "getFloat32"],
  f8: [Float64Array, 8, "getFloat64"],
  c8: [Float32Array, 4, "getFloat32"],
  c16: [Float64Array, 8, "getFloat64"],
};

/**
 * Parses a dtype string ("<f4", "|b1", ">i8", "<U7", "float32").
 * @returns {{str: string, little: boolean, kind: string, itemsize: number}}
 */
export function parseDtype(text) {
  if (typeof text !== "string") throw new Error(`dtype must be a string, got ${JSON.stringify(text)}`);
  const s = Object.prototype.hasOwnProperty.call(LEGACY_NAMES, text) ? LEGACY_NAMES[text] : text;
  const m = /^([<>|=]?)([biufcUS])([0-9]{1,7})$/.exec(s);
  if (!m) throw new Error(`unknown dtype ${JSON.stringify(text)}`);
  const order = m[1], kind = m[2], n = Number(m[3]);
  let itemsize;
  if (kind === "U") itemsize = 4 * n;
  else if (kind === "S") itemsize = n;
  else {
    const code = (kind === "c" ? "c" : kind) + n;
    if (!NUMERIC[code] && code !== "f2") throw new Error(`unknown dtype ${JSON.stringify(text)}`);
    itemsize = n;
  }
  if (itemsize === 0 && kind !== "U" && kind !== "S") throw new Error(`unknown dtype ${JSON.stringify(text)}`);
  const little = order === ">" ? false : order === "<" ? true : order === "=" ? LITTLE : true;
  return { str: text, little, kind, itemsize, code: kind + n };
}

function checkInt(value, what) {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new Error(`${what} must be a non-negative integer, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** IEEE half -> number. */
export function halfToFloat(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
  if (e === 0) return s * f * 2 ** -24;
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}

/**
 * Checks an array reference and returns [dtype info, shape, count, file offset, size].
 */
export function checkRef(ref, fileSize = Infinity) {
  if (ref === null || typeof ref !== "object" || ref.__type !== "ndarray") {
    throw new Error("not an array reference (expected an object with __type 'ndarray')");
  }
  const dt = parseDtype(ref.dtype);
  if (!Array.isArray(ref.shape)) throw new Error(`shape must be a list, got ${JSON.stringify(ref.shape)}`);
  if (ref.order !== undefined && ref.order !== "C") throw new Error(`order ${JSON.stringify(ref.order)} is not "C"`);
  let count = 1;
  ref.shape.forEach((d, i) => { count *= checkInt(d, `shape[${i}]`); });
  if (!Number.isSafeInteger(count)) throw new Error("shape too large");
  const off = checkInt(ref.npyoff, "npyoff");
  const size = ref.size === undefined ? count * dt.itemsize : checkInt(ref.size, "size");
  if (size !== count * dt.itemsize) {
    throw new Error(`size ${size} is not prod(shape) * itemsize = ${count * dt.itemsize}`);
  }
  if (off + size > fileSize) {
    throw new Error(`array out of bounds: bytes ${off}..${off + size} of a ${fileSize}-byte file`);
  }
  return [dt, ref.shape.slice(), count, off, size];
}

/**
 * Decodes one array reference.
 * @param {object} ref the reference, as the batch JSON holds it
 * @param {ArrayBuffer} buffer the .bin file's bytes from file offset `base`
 * @param {number} [base=0] the file offset of buffer's first byte
 * @returns {{dtype: string, shape: number[], data: ArrayLike, complex?: boolean}}
 */
export function decodeArray(ref, buffer, base = 0) {
  if (!(buffer instanceof ArrayBuffer)) throw new Error("buffer must be an ArrayBuffer");
  const [dt, shape, count, off, size] = checkRef(ref);
  const start = off - base;
  if (start < 0 || start + size > buffer.byteLength) {
    throw new Error(`array out of bounds: bytes ${off}..${off + size} not in the ${buffer.byteLength} ` +
      `bytes read from offset ${base}${base === 0 ? " (the whole file)" : ""}`);
  }
  const out = { dtype: dt.str, shape, data: null };
  if (dt.kind === "U" || dt.kind === "S") {
    out.data = decodeStrings(dt, buffer, start, count);
    return out;
  }
  const view = new DataView(buffer, start, size);
  if (dt.code === "f2") {
    const data = new Float32Array(count);
    for (let i = 0; i < count; i++) data[i] = halfToFloat(view.getUint16(2 * i, dt.little));
    out.data = data;
    return out;
  }
  const [Ctor, width, getter] = NUMERIC[dt.code];
  const n = dt.kind === "c" ? 2 * count : count;
  if (dt.kind === "c") out.complex = true;
  if (dt.little === LITTLE && start % width === 0) {
    // The format's 8-byte alignment: lay the typed array straight over the bytes (copied, so
    // that the result does not pin a large buffer).
    out.data = new Ctor(buffer.slice(start, start + size));
  } else {
    const data = new Ctor(n);
    for (let i = 0; i < n; i++) data[i] = view[getter](i * width, dt.little);
    out.data = data;
  }
  if (dt.code === "b1") {
    for (let i = 0; i < n; i++) if (out.data[i] > 1) throw new Error(`bool array holds byte ${out.data[i]}`);
  }
  return out;
}

function decodeStrings(dt, buffer, start, count) {
  const strings = new Array(count);
  const bytes = new Uint8Array(buffer, start, count * dt.itemsize);
  const view = new DataView(buffer, start, count * dt.itemsize);
  for (let i = 0; i < count; i++) {
    let s = "";
    if (dt.kind === "S") {
      let end = dt.itemsize;
      while (end > 0 && bytes[i * dt.itemsize + end - 1] === 0) end--;
      for (let j = 0; j < end; j++) s += String.fromCharCode(bytes[i * dt.itemsize + j]);
    } else {
      const n = dt.itemsize / 4, cps = [];
      for (let j = 0; j < n; j++) cps.push(view.getUint32(i * dt.itemsize + 4 * j, dt.little));
      while (cps.length && cps[cps.length - 1] === 0) cps.pop();
      for (const cp of cps) {
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) throw new Error(`bad code point ${cp} in a unicode array`);
      }
      s = String.fromCodePoint(...cps);
    }
    strings[i] = s;
  }
  return strings;
}

/** Element [i] of a decoded array's data as a JS number (or string). */
export function valueAt(data, i) {
  const v = data[i];
  return typeof v === "bigint" ? Number(v) : v;
}
