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
//
// Compressed arrays (format version 2, "Compressed arrays" in the spec): a reference with
// "codec": {"name": "zstd", "configuration": {"chunk_rows", "delta"}} and "stored" bytes at
// npyoff: a table of chunk offsets (little-endian uint64), then one zstd frame per chunk of
// rows, decoded with the vendored fzstd (fzstd.mjs, MIT) after checking each frame's declared
// size; XOR / difference delta coding undone row by row. An unknown codec name throws.

import { decompress as zstdDecompress } from "./fzstd.mjs";

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
  const stored = ref.codec === undefined || ref.codec === null ? size : checkCodec(ref, size);
  if (off + stored > fileSize) {
    throw new Error(`array out of bounds: bytes ${off}..${off + stored} of a ${fileSize}-byte file`);
  }
  // (the last item: the bytes to read, the stored ones of a compressed array)
  return [dt, ref.shape.slice(), count, off, stored];
}

// Rows per chunk and one chunk's decoded bytes at most; no zstd frame decodes to more than
// 32768 times its size (a block of at most 128 KiB takes at least 4 bytes).
const MAX_CHUNK_ROWS = 65536;
const MAX_CHUNK_BYTES = 2 ** 28;
const MAX_ZSTD_RATIO = 32768;
const DELTAS = ["none", "xor", "sub"];

/** Checks a compressed reference's codec; returns its stored bytes. */
function checkCodec(ref, size) {
  const codec = ref.codec;
  if (typeof codec !== "object" || typeof codec.configuration !== "object" || codec.configuration === null) {
    throw new Error("codec must be {name, configuration}");
  }
  if (codec.name !== "zstd") throw new Error(`unknown codec ${JSON.stringify(codec.name)} (this viewer knows zstd)`);
  const rows = checkInt(codec.configuration.chunk_rows, "chunk_rows");
  if (rows < 1 || rows > MAX_CHUNK_ROWS) throw new Error(`chunk_rows ${rows} not in [1, ${MAX_CHUNK_ROWS}]`);
  if (!DELTAS.includes(codec.configuration.delta)) throw new Error(`unknown delta ${JSON.stringify(codec.configuration.delta)}`);
  const stored = checkInt(ref.stored, "stored");
  if (stored < 8 || ref.shape.length < 1) throw new Error("a compressed array needs rows and at least 8 stored bytes");
  if (size > stored * MAX_ZSTD_RATIO) throw new Error(`${stored} stored bytes cannot decode to ${size} bytes`);
  return stored;
}

/** The content size a zstd frame's header declares (-1: none). */
function frameContentSize(b) {
  if (b.length < 6 || b[0] !== 0x28 || b[1] !== 0xb5 || b[2] !== 0x2f || b[3] !== 0xfd) throw new Error("a chunk is not a zstd frame");
  const fhd = b[4], fcsFlag = fhd >> 6, single = (fhd >> 5) & 1;
  let at = 5 + (single ? 0 : 1) + [0, 1, 2, 4][fhd & 3];
  const width = [single ? 1 : 0, 2, 4, 8][fcsFlag];
  if (width === 0) return -1;
  if (at + width > b.length) throw new Error("a zstd frame header is cut short");
  let v = 0;
  for (let i = width - 1; i >= 0; i--) v = v * 256 + b[at + i];
  return width === 2 ? v + 256 : v;
}

/** A compressed array's decoded bytes (`size` of them) from its `stored` bytes. */
function decodeChunks(ref, bytes, size) {
  const rows = ref.shape[0], cr = ref.codec.configuration.chunk_rows, delta = ref.codec.configuration.delta;
  const rowBytes = rows ? size / rows : 0;
  const n = Math.ceil(rows / cr), tbytes = 8 * (n + 1);
  if (tbytes > bytes.length) throw new Error("the stored bytes cannot hold the chunk table");
  if (rowBytes * cr > MAX_CHUNK_BYTES) throw new Error("chunks too large");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Uint8Array(size);
  let prev = -1;
  for (let c = 0; c <= n; c++) {
    const big = view.getBigUint64(8 * c, true);
    if (big > BigInt(bytes.length)) throw new Error("chunk offsets out of bounds");
    const v = Number(big);
    if ((c === 0 && v !== tbytes) || (c === n && v !== bytes.length) || (c > 0 && v <= prev)) {
      throw new Error(`chunk offsets must ascend strictly from ${tbytes} to ${bytes.length}`);
    }
    if (c > 0) {
      const r0 = (c - 1) * cr, nrows = Math.min(cr, rows - r0), want = nrows * rowBytes;
      const frame = bytes.subarray(prev, v);
      const declared = frameContentSize(frame);
      if (declared !== want || want > frame.length * MAX_ZSTD_RATIO) {
        throw new Error(`chunk ${c - 1} declares ${declared} bytes, expected ${want}`);
      }
      const dest = out.subarray(r0 * rowBytes, r0 * rowBytes + want);
      const got = zstdDecompress(frame, dest);
      if (got.length !== want) throw new Error(`chunk ${c - 1} decoded to ${got.length} bytes, expected ${want}`);
      if (got !== dest) dest.set(got);
      if (delta !== "none") {
        for (let j = 1; j < nrows; j++) {
          const row = dest.subarray(j * rowBytes, (j + 1) * rowBytes);
          const up = dest.subarray((j - 1) * rowBytes, j * rowBytes);
          if (delta === "xor") for (let i = 0; i < rowBytes; i++) row[i] ^= up[i];
          else for (let i = 0; i < rowBytes; i++) row[i] = (row[i] + up[i]) & 255;
        }
      }
    }
    prev = v;
  }
  return out;
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
  const [dt, shape, count, off, stored] = checkRef(ref);
  const start = off - base;
  if (start < 0 || start + stored > buffer.byteLength) {
    throw new Error(`array out of bounds: bytes ${off}..${off + stored} not in the ${buffer.byteLength} ` +
      `bytes read from offset ${base}${base === 0 ? " (the whole file)" : ""}`);
  }
  if (ref.codec !== undefined && ref.codec !== null) {
    const size = count * dt.itemsize;
    const raw = decodeChunks(ref, new Uint8Array(buffer, start, stored), size);
    const plain = { __type: "ndarray", shape, order: "C", dtype: ref.dtype, npyoff: 0, size };
    return decodeArray(plain, raw.buffer, 0);
  }
  const size = stored;
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
