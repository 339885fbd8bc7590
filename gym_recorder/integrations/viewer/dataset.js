// dataset.js: views over many episodes: outlier episodes and per-dimension statistics.

const OUTLIER_Z = 3.5;          // robust z-score (median and MAD) beyond which an episode stands out
const MAD_SCALE = 1.4826;       // MAD x this estimates the standard deviation of normal data
const MEAN_AD_SCALE = 1.2533;   // the mean absolute deviation x this estimates it likewise
const PARALLEL = 4;             // episodes read at once for the statistics

function median(sorted) {
  const n = sorted.length;
  return n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

/** Marks ep.outlier ("return 12.3 (median 150)", or "") for returns or lengths far from the rest. */
export function robustOutliers(eps) {
  for (const ep of eps) ep.outlier = "";
  for (const key of ["return", "length"]) {
    const xs = eps.map((e) => e[key]).filter(Number.isFinite);
    if (xs.length < 8) continue;   // too few to say what is usual
    const sorted = Float64Array.from(xs).sort(), med = median(sorted);
    const dev = Float64Array.from(sorted, (x) => Math.abs(x - med)).sort();
    let mad = median(dev) * MAD_SCALE;
    // More than half the episodes alike (MAD 0): the mean absolute deviation stands in.
    if (!(mad > 0)) mad = (dev.reduce((a, x) => a + x, 0) / dev.length) * MEAN_AD_SCALE;
    if (!(mad > 0)) continue;
    for (const ep of eps) {
      const z = (ep[key] - med) / mad;
      if (Math.abs(z) > OUTLIER_Z) {
        const text = `${key} ${Number(ep[key].toPrecision(4))} (median ${Number(med.toPrecision(4))})`;
        ep.outlier = ep.outlier ? `${ep.outlier}, ${text}` : text;
      }
    }
  }
}

/** [{name, min, max, mean, std, count}] per dimension of the series leaves of `eps`. */
export async function dimensionStats(rec, eps) {
  const acc = new Map();
  const add = (name, col) => {
    let a = acc.get(name);
    if (!a) { a = { name, min: Infinity, max: -Infinity, sum: 0, sq: 0, count: 0, shift: NaN }; acc.set(name, a); }
    for (let i = 0; i < col.length; i++) {
      const v = col[i];
      if (!Number.isFinite(v)) continue;
      if (Number.isNaN(a.shift)) a.shift = v;   // shifted sums: no cancellation for big offsets
      const d = v - a.shift;
      if (v < a.min) a.min = v;
      if (v > a.max) a.max = v;
      a.sum += d; a.sq += d * d; a.count++;
    }
  };
  let next = 0;
  const worker = async () => {
    while (next < eps.length) {
      const data = rec.episodeData(eps[next++]);
      const leaves = [...data.observations.values(), ...data.actions.values(), data.rewards].filter((l) => l.kind === "series" && l.rows);
      const cols = await Promise.all(leaves.map((l) => l.readSeries()));
      leaves.forEach((leaf, i) => {
        const scalar = cols[i].length === 1 && !(leaf.rowShape && leaf.rowShape.length);
        cols[i].forEach((col, j) => add(scalar ? leaf.path : `${leaf.path}[${j}]`, col));
      });
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  return [...acc.values()].map((a) => {
    const mean = a.count ? a.shift + a.sum / a.count : NaN;
    const variance = a.count ? Math.max(0, a.sq / a.count - (a.sum / a.count) ** 2) : NaN;
    return { name: a.name, min: a.min, max: a.max, mean, std: Math.sqrt(variance), count: a.count };
  });
}
