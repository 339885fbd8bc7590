"""The benchmark's report: tables of every figure, then one ``ok``/``MISS`` line per target.

Every target of issue 12 is printed, in every mode, with a stable key (``rec.cartpole.added``,
...) so that a script (and ``tests/test_bench_smoke.py``) can find it; a target that could not be
measured prints ``MISS`` with the reason, never nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from harness import BUSY_OTHERS, MB, median

# The targets of issue 12 (medians in one run, unless said otherwise).
TARGET_CARTPOLE_ADDED_US = 1.5   # CartPole-v1: time added per step
TARGET_FLOOR_FACTOR = 1.25       # images: added <= this times the floor's added, same run
TARGET_READ_RATIO = 0.70         # iterating an image recording vs np.fromfile of its bytes
TARGET_COLUMN_RATIO = 0.50       # all observations as one array vs np.fromfile
TARGET_EPISODE_US = 15.0         # iterating a 10,000-episode CartPole recording, per episode
TARGET_OPEN_FETCH_MS = 50.0      # open a 10,000-episode recording and fetch one random episode
TARGET_STABLE_FACTOR = 1.5       # stress, warm: gym_recorder's max added <= this x its median
# "Near the batch target": the writer holds at most MAX_PENDING_BATCHES queued batches, one being
# written and one being filled, plus pooled columns, so a handful of batches; this many batch
# targets of RSS growth leave room for allocator slack.
RSS_NEAR_BATCHES = 10

# Every target line's key, in the order printed.
TARGET_KEYS = [
    "rec.cartpole.added", "rec.image84.floor", "rec.image210.floor",
    "read.cartpole.episode", "read.84x84x3.fromfile", "read.210x160x3.fromfile",
    "read.cartpole.vs_seed", "read.84x84x3.vs_seed", "read.210x160x3.vs_seed",
    "read.cartpole.column", "read.84x84x3.column", "read.210x160x3.column",
    "open.fetch", "rss.peak",
    "stress.warm.vs_sync", "stress.neighbour.vs_sync", "stress.cold.vs_sync",
    "stress.warm.stable",
]


def _line(key: str, ok: bool | None, what: str, measured: str) -> dict:
    status = "MISS" if not ok else "ok"
    return {"key": key, "status": status, "what": what, "measured": measured}


def _fmt_spread(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"{min(values):+.1f} / {median(values):+.1f} / {max(values):+.1f}"


def targets(results: dict) -> list[dict]:
    """One line per key of :data:`TARGET_KEYS`."""
    lines: dict[str, dict] = {}
    rec = results.get("recording", {})
    r = rec.get("cartpole", {}).get("variants", {}).get("gym_recorder")
    lines["rec.cartpole.added"] = _line(
        "rec.cartpole.added", r is not None and r["added_us"] <= TARGET_CARTPOLE_ADDED_US,
        f"CartPole-v1: added per step <= +{TARGET_CARTPOLE_ADDED_US:g} us",
        "not measured" if r is None else f"{r['added_us']:+.2f} us (min/med/max "
        f"{r['added_us_spread']['min']:+.2f}/{r['added_us_spread']['median']:+.2f}/"
        f"{r['added_us_spread']['max']:+.2f})")
    for key in ("image84", "image210"):
        rows = rec.get(key, {})
        r = rows.get("variants", {}).get("gym_recorder")
        floor = rows.get("variants", {}).get("floor")
        k = f"rec.{key}.floor"
        if r is None or floor is None:
            lines[k] = _line(k, False, f"{key}: added <= {TARGET_FLOOR_FACTOR:g}x floor",
                             "not measured")
            continue
        limit = TARGET_FLOOR_FACTOR * max(floor["added_us"], 0.0)
        lines[k] = _line(
            k, r["added_us"] <= limit,
            f"{rows['label']}: added <= {TARGET_FLOOR_FACTOR:g}x the floor's "
            f"({floor['added_us']:+.2f} us)",
            f"{r['added_us']:+.2f} us = {r['added_us'] / max(floor['added_us'], 1e-9):.2f}x floor")
    thr = results.get("reading", {}).get("throughput", {})
    cp = thr.get("CartPole-v1")
    lines["read.cartpole.episode"] = _line(
        "read.cartpole.episode", cp is not None and cp["us_per_episode"] <= TARGET_EPISODE_US,
        f"iterate {cp['episodes'] if cp else '?'}-episode CartPole: <= {TARGET_EPISODE_US:g} "
        "us/episode", "not measured" if cp is None else f"{cp['us_per_episode']:.1f} us/episode")
    for name in ("84x84x3", "210x160x3"):
        t = thr.get(name)
        k = f"read.{name}.fromfile"
        lines[k] = _line(k, t is not None and t["ratio"] >= TARGET_READ_RATIO,
                         f"iterate {name}: >= {TARGET_READ_RATIO:.0%} of np.fromfile",
                         "not measured" if t is None else f"{t['ratio']:.1%}")
    for name, t in (("cartpole", cp), ("84x84x3", thr.get("84x84x3")),
                    ("210x160x3", thr.get("210x160x3"))):
        k = f"read.{name}.vs_seed"
        lines[k] = _line(k, t is not None and t["vs_seed_min"] >= 1.0,
                         f"iterate {name}: never slower than the seed's reader in any repeat",
                         "not measured" if t is None else
                         f"{t['vs_seed']:.2f}x the seed's speed (slowest repeat "
                         f"{t['vs_seed_min']:.2f}x; seed {t['seed_gb_s']:.2f} GB/s)")
    for name, t in (("cartpole", cp), ("84x84x3", thr.get("84x84x3")),
                    ("210x160x3", thr.get("210x160x3"))):
        k = f"read.{name}.column"
        lines[k] = _line(k, t is not None and t["column_ratio"] >= TARGET_COLUMN_RATIO,
                         f"{name}: all observations as one array >= {TARGET_COLUMN_RATIO:.0%} "
                         "of np.fromfile",
                         "not measured" if t is None else f"{t['column_ratio']:.1%}")
    of = results.get("reading", {}).get("open_fetch")
    lines["open.fetch"] = _line(
        "open.fetch", of is not None and of["ms"] <= TARGET_OPEN_FETCH_MS,
        f"open {of['episodes'] if of else '?'} episodes + fetch one <= {TARGET_OPEN_FETCH_MS:g} ms",
        "not measured" if of is None else f"{of['ms']:.2f} ms")
    rss = results.get("rss", {})
    g = rss.get("variants", {}).get("gym_recorder", {})
    limit = RSS_NEAR_BATCHES * rss.get("batch_target_mb", 0)
    lines["rss.peak"] = _line(
        "rss.peak", "growth_mb" in g and g["growth_mb"] <= limit,
        f"peak RSS growth <= {RSS_NEAR_BATCHES} batch targets ({limit:.0f} MB)",
        f"{g['growth_mb']:.1f} MB" if "growth_mb" in g else f"not measured {g.get('error', '')}")
    stress = results.get("stress", {}).get("conditions", {})
    for cond in ("warm", "neighbour", "cold"):
        c = stress.get(cond, {})
        ours, sync = c.get("gym_recorder", []), c.get("sync", [])
        k = f"stress.{cond}.vs_sync"
        pairs = list(zip(ours, sync))
        worst = max((o - s for o, s in pairs), default=float("nan"))
        lines[k] = _line(
            k, bool(pairs) and all(o <= s for o, s in pairs),
            f"210x160x3 {cond}: never slower than sync in any repeat",
            f"ours {_fmt_spread(ours)}, sync {_fmt_spread(sync)} us (min/med/max); "
            f"worst repeat ours-sync {worst:+.1f} us" if pairs else "not measured")
    ours = stress.get("warm", {}).get("gym_recorder", [])
    lines["stress.warm.stable"] = _line(
        "stress.warm.stable",
        bool(ours) and max(ours) <= TARGET_STABLE_FACTOR * median(ours),
        f"210x160x3 warm: max added <= {TARGET_STABLE_FACTOR:g}x median",
        f"max {max(ours):+.1f} = {max(ours) / median(ours):.2f}x median {median(ours):+.1f} us"
        if ours else "not measured")
    return [lines[k] for k in TARGET_KEYS]


def report(results: dict, out: Callable[[str], None]) -> None:
    """Prints every table and the target lines."""
    meta = results["meta"]
    out("")
    out(f"gym_recorder {meta['gym_recorder']} | gymnasium {meta['gymnasium']} | numpy "
        f"{meta['numpy']} | Python {meta['python']} | {meta['cpus']} CPUs | {meta['machine']}")
    others = meta.get("others_cpu_fraction")
    if others is not None:
        out(f"other processes used {others:.0%} of one core during the run"
            + ("  WARNING: they competed for the cores; the numbers are inflated"
               if others > BUSY_OTHERS else ""))
    out(f"mode: {meta['mode']}; recording medians over {meta['repeats']} interleaved repeats "
        f"(Minari: {meta['minari_repeats']}); {meta['minari']}; memory "
        + ("primed before each run" if meta["prime"] else "not primed (--no-prime)"))
    out("")
    out("Recording (per step; 'added' = paired difference with the bare env in the same repeat)")
    header = (f"{'env':<16} {'recorder':<13} {'steps':>7} {'us/step':>8} {'added':>8} "
              f"{'min/max added':>15} {'xfloor':>6} {'+close':>9} {'MB/s':>7} {'MB/10k':>8}")
    out(header)
    out("-" * len(header))
    for rows in results["recording"].values():
        label = rows["label"]
        for v, r in rows["variants"].items():
            if v == "bare":
                out(f"{label:<16} {v:<13} {r['steps']:>7} {r['us_per_step']:>8.2f}")
                continue
            sp = r["added_us_spread"]
            xfloor = f"{r['vs_floor']:.2f}" if r["vs_floor"] is not None else ""
            out(f"{label:<16} {v:<13} {r['steps']:>7} {r['us_per_step']:>8.2f} "
                f"{r['added_us']:>+8.2f} {sp['min']:>+7.1f}/{sp['max']:<+7.1f} {xfloor:>6} "
                f"{r['added_us_with_close']:>+9.2f} {r['mb_per_s']:>7.1f} "
                f"{r['mb_per_10k_steps']:>8.2f}")
    out("  added: the stepping loop; xfloor: added / the floor's added (median of repeats); "
        "+close: including the final close() (write + fsync) or Minari's flush")
    out("  floor: copy into a reused 5 MB chunk, write full chunks (no JSON/CRC/thread); "
        "sync: the seed's design, a new array per frame, batches written in the stepping thread")
    stress = results.get("stress")
    if stress:
        out("")
        out(f"Stability: {stress['steps']} steps of {stress['label']} per run "
            f"({stress['gb_per_run']:.2f} GB), added us/step min / median / max over repeats")
        out(f"  warm: memory primed; neighbour: another process writes "
            f"{stress['neighbour_mb']:.0f} MB during the loop; cold: the first recording in a "
            "fresh process, no priming")
        for cond, c in stress["conditions"].items():
            for v, xs in c.items():
                if v == "bare_us":
                    continue
                out(f"  {cond:<10} {v:<13} {_fmt_spread(xs):>28}   repeats: "
                    + " ".join(f"{x:+.1f}" for x in xs))
        for e in stress.get("cold_errors", []):
            out(f"  cold run failed: {e}")
    out("")
    out("Reading (page cache warm; touching every byte of every array)")
    rd = results["reading"]
    of = rd["open_fetch"]
    if of is not None:
        out(f"  open a {of['episodes']}-episode recording + fetch a random episode: "
            f"{of['ms']:.2f} ms median, {of['max_ms']:.2f} ms max")
    ra = rd.get("random")
    if ra is not None:
        out(f"  reader[i] at random, {ra['fetches']} fetches over {ra['episodes']} episodes in "
            f"{ra['batches']} batches: {ra['us_per_fetch']:.1f} us a fetch, against "
            f"{ra['baseline_us_per_fetch']:.1f} us keeping 4 batches (cache_bytes=0): "
            f"{ra['speedup']:.0f}x")
    for key, t in rd["throughput"].items():
        out(f"  {key:<12} {t['episodes']:>6} episodes, {t['bin_bytes'] / MB:7.1f} MB of .bin: "
            f"iterate {t['reader_gb_s']:5.2f} GB/s ({t['ratio']:.0%}, "
            f"{t['us_per_episode']:.1f} us/episode); column {t['column_gb_s']:5.2f} GB/s "
            f"({t['column_ratio']:.0%}); np.fromfile {t['fromfile_gb_s']:5.2f} GB/s; the seed's "
            f"reader {t['seed_gb_s']:5.2f} GB/s (ours {t['vs_seed']:.2f}x)")
    out("")
    rss = results["rss"]
    out(f"Peak RSS growth over one {rss['steps']}-step 84x84x3 episode "
        f"({rss['episode_mb']:.0f} MB of frames; batch target {rss['batch_target_mb']:.0f} MB)")
    for v, r in rss["variants"].items():
        if "error" in r:
            out(f"  {v:<16} failed: {r['error']}")
        else:
            out(f"  {v:<16} {r['growth_mb']:8.1f} MB  (peak {r['after_mb']:.0f} MB, "
                f"{r['source']})")
    out("")
    out("Targets (issue 12)")
    for line in results["targets"]:
        out(f"  {line['status']:<4}  {line['key']:<25} {line['what']:<62} {line['measured']}")
