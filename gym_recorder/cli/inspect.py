"""The ``gym-recorder`` commands that read, check, export or move a recording: ``info``,
``plot``, ``export`` (npz, Parquet, Minari), ``import-minari``, ``verify``, ``repair``, ``view``
and ``push``.

Each is a thin layer over the library function that does the work (:func:`gym_recorder.integrations.export
.summarize`, :mod:`gym_recorder.integrity`, :mod:`gym_recorder.integrations.cloud`, ...): it calls it and
prints what it did. The parser and :func:`~gym_recorder.cli.main` are in :mod:`gym_recorder.cli`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .output import EXIT_OK, MB, count, number, say
from ..errors import CommandError

__all__ = ["cmd_info", "cmd_plot", "cmd_export", "cmd_export_training", "cmd_import_minari",
           "cmd_verify", "cmd_repair", "cmd_view", "cmd_push", "cmd_compress", "cmd_decompress"]


def _episodes(episodes: int, empty: int) -> str:
    """info's episode count: the episodes with steps, the empty ones (a reset, then no step)
    apart, since the figures leave them out."""
    if not empty:
        return f"{episodes:,}"
    return f"{episodes - empty:,}, and {empty:,} empty (reset, no step; not in the figures)"


def _metadata_lines(metadata: dict[str, Any]) -> list[str]:
    """info's lines for a recording's metadata: one a key, strings as they are."""
    lines = []
    for n, (key, value) in enumerate(metadata.items()):
        # (a string with control characters is quoted: it comes from a file, not a person)
        text = (value if isinstance(value, str) and value.isprintable()
                else json.dumps(value, ensure_ascii=False))
        lines.append(f"{'metadata' if n == 0 else '':<19}{key}: {text}")
    return lines


def _env_blocks(envs: list[dict[str, Any]]) -> list[str]:
    """info's lines for each env of a directory that holds several."""
    lines = []
    for g in envs:
        lines += [
            f"  env id           {g['env_id'] or '-'}",
            f"    observation    {g['observation_space'] or '-'}",
            f"    action         {g['action_space'] or '-'}",
            f"    episodes       {_episodes(g['episodes'], g.get('empty_episodes', 0))}, "
            f"steps {g['steps']:,}, writers "
            f"{', '.join(map(str, g['writers']))}",
            f"    total_reward   mean {number(g['total_reward_mean'])}, "
            f"min {number(g['total_reward_min'])}, max {number(g['total_reward_max'])}",
            "    ends           " + (", ".join(f"{k} {v}" for k, v in g["ends"].items()) or "-"),
        ]
    return lines


def cmd_info(args: argparse.Namespace) -> int:
    from ..integrations.export import summarize

    if getattr(args, "deleted", False):
        from .edit import print_deleted

        return print_deleted(args)
    s = summarize(args.directory)
    if not s["writers"]:
        raise CommandError(f"no recording in {args.directory}")
    if args.json:
        print(json.dumps(s, indent=2, allow_nan=False))
        return EXIT_OK
    if args.quiet:
        return EXIT_OK
    lines = [
        f"directory          {s['directory']}",
        f"env id             {s['env_id'] or '-'}",
        f"observation space  {s['observation_space'] or '-'}",
        f"action space       {s['action_space'] or '-'}",
        f"episodes           {_episodes(s['episodes'], s['empty_episodes'])}",
        f"steps              {s['steps']:,}",
        f"total_reward       mean {number(s['total_reward_mean'])}, "
        f"min {number(s['total_reward_min'])}, max {number(s['total_reward_max'])}",
        "ends               " + (", ".join(f"{k} {v}" for k, v in s["ends"].items()) or "-"),
        f"bytes on disk      {s['bytes']:,} ({s['bytes'] / MB:.2f} MB)",
        f"writers            {len(s['writers'])}",
    ]
    if s.get("deleted") or s.get("reclaimable"):
        lines.insert(-2, f"deleted            {s['deleted']:,} episodes (info --deleted lists "
                         f"them); compact would free about {s['reclaimable'] / MB:.2f} MB")
    if s.get("multiagent"):
        ma = s["multiagent"]
        if not s["env_id"] and ma.get("env"):
            lines[1] = f"env                {ma['env']} (PettingZoo)"
        lines[4:4] = [f"agents             {len(ma['agents'])} ({ma['api']}), return mean / min / "
                      "max:"] + [
            f"    {name:<14} {number(r['mean'])} / {number(r['min'])} / {number(r['max'])}"
            for name, r in ma["returns"].items()]
    if len(s.get("envs", ())) > 1:
        lines[1:4] = [f"envs               {len(s['envs'])}"] + _env_blocks(s["envs"])
    distinct = {json.dumps(w.get("metadata"), sort_keys=True) for w in s["writers"]}
    if s.get("metadata") and len(distinct) == 1:  # one metadata for all: shown once
        lines[-1:-1] = _metadata_lines(s["metadata"])
    for k, w in enumerate(s["writers"]):
        state = "legacy" if w["legacy"] else ("complete" if w["complete"] else "open or killed")
        vector = f", vector of {w['vector'].get('num_envs')}" if w["vector"] else ""
        lines.append(f"  {k:>3}  {w['prefix']}  {count(w['episodes'], 'episode')}, "
                     f"{count(w['batches'], 'batch', 'batches')}, {state}{vector}")
        if len(distinct) > 1 and w.get("metadata"):
            lines.append(f"       metadata {json.dumps(w['metadata'], ensure_ascii=False)}")
    from ..integrity.recompress import leaf_bytes

    leaves = leaf_bytes(args.directory)
    if any(leaf["stored"] != leaf["raw"] for leaf in leaves):
        lines.append("bytes per leaf     stored / raw")
        lines += [f"  {leaf['leaf']:<16} {leaf['stored']:,} / {leaf['raw']:,}"
                  + (f" ({leaf['raw'] / leaf['stored']:.0f}x)" if leaf["stored"] else "")
                  for leaf in leaves]
    print("\n".join(lines))
    rows = s["episode_table"]
    if not rows:
        return EXIT_OK
    limit = args.limit if args.limit else len(rows)
    shown = rows if len(rows) <= limit else rows[: (limit + 1) // 2] + [None] + rows[
        len(rows) - limit // 2:]
    header = ("episode", "length", "total_reward", "end", "seed", "sub_env", "writer")
    table: list[tuple[str, ...]] = [header]
    for r in shown:
        if r is None:
            table.append(("...",) + ("",) * (len(header) - 1))
            continue
        table.append((str(r["index"]), str(r["length"]), number(r["total_reward"]), r["end"] or "-",
                      "-" if r["seed"] is None else str(r["seed"]),
                      "-" if r["sub_env"] is None else str(r["sub_env"]), str(r["writer"])))
    widths = [max(len(row[c]) for row in table) for c in range(len(header))]
    print()
    for row in table:
        print("  ".join(cell.rjust(w) if c not in (3,) else cell.ljust(w)
                        for c, (cell, w) in enumerate(zip(row, widths))).rstrip())
    if len(rows) > limit:
        print(f"({count(len(rows) - limit, 'episode')} not shown; --limit 0 shows all)")
    return EXIT_OK


def cmd_plot(args: argparse.Namespace) -> int:
    from ..integrations.export import plot_returns, summarize

    s = summarize(args.directory)
    plot_returns(s, args.output, size=args.size, dpi=args.dpi)
    say(args, f"wrote {args.output}: total reward and length of "
               f"{count(s['episodes'], 'episode')} "
               f"({args.size[0]}x{args.size[1]} pixels)")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    import numpy as np

    from ..integrations.export import export_npz

    if args.format != "npz" or args.output is None or args.dataset_id is not None:
        return cmd_export_training(args)
    if args.agent is not None:
        raise CommandError("--agent is for --format parquet (npz holds every agent's rows)")

    result = export_npz(args.directory, args.output, compress=args.compress, env_id=args.env)
    say(args, f"wrote {result['path']}: {count(result['episodes'], 'episode')}, "
               f"{count(result['steps'], 'step')}")
    if not args.quiet:
        width = max(len(k) for k in result["arrays"])
        for name, (shape, dtype) in result["arrays"].items():
            print(f"  {name.ljust(width)}  {np.dtype(dtype).name:<8}  {tuple(shape)}")
        for key, why in result["infos_left_out"].items():
            print(f"  info {key!r} not exported: {why}")
    return EXIT_OK


def cmd_export_training(args: argparse.Namespace) -> int:
    """``export --format parquet|minari`` (and the missing -o of npz)."""
    from ..integrations.export import ExportError

    episodes = None
    if args.env is not None:
        from ..read.reader import RecordingReader
        from ..training.selection import select

        with RecordingReader(args.directory) as reader:
            episodes = select(reader, env_id=args.env)
    if args.format == "minari":
        if args.dataset_id is None or args.output is not None:
            raise ExportError("--format minari takes --dataset-id NS/NAME-vN and no --output "
                              "(Minari's root, MINARI_DATASETS_PATH, decides where it goes)")
        from ..integrations.minari_io import export_minari

        r = export_minari(args.directory, args.dataset_id, episodes=episodes,
                          imports=args.imports or ())
        say(args, f"wrote Minari dataset {r['dataset_id']} at {r['path']}: {r['episodes']} "
                   f"episodes, {r['steps']} steps")
        if r["skipped"]:
            say(args, f"  {count(len(r['skipped']), 'episode')} of 0 steps not exported (a "
                      f"Minari episode has at least one step): "
                      f"{', '.join(map(str, r['skipped'][:10]))}"
                      f"{' ...' if len(r['skipped']) > 10 else ''}")
        if r["env_spec_dropped"]:
            say(args, f"  env spec not exported: {r['env_spec_dropped']}")
        for key, why in r["dropped"].items():
            say(args, f"  info {key!r} not exported: {why}")
        return EXIT_OK
    if args.output is None or args.dataset_id is not None:
        raise ExportError(f"--format {args.format} takes --output and no --dataset-id")
    from ..integrations.parquet import export_parquet

    r = export_parquet(args.directory, args.output,
                       max_file_bytes=args.max_file_bytes, episodes=episodes,
                       infos=not args.no_infos, agent=args.agent)
    say(args, f"wrote {args.output}: {r['episodes']} episodes, {r['steps']} steps in "
               f"{r['files']} Parquet file{'s' if r['files'] != 1 else ''}, README.md, "
               f"gym_recorder.json")
    for key, why in r["infos_left_out"].items():
        say(args, f"  info {key!r} not exported: {why}")
    return EXIT_OK


def cmd_import_minari(args: argparse.Namespace) -> int:
    from ..integrations.minari_io import import_minari

    r = import_minari(args.dataset, args.directory)
    say(args, f"imported {r['episodes']} episodes, {r['steps']} steps of Minari dataset "
               f"{r['dataset_id']} into {args.directory}")
    return EXIT_OK


def _integrity() -> Any:
    try:
        from .. import integrity
    except ImportError as e:
        raise CommandError(f"gym_recorder.integrity cannot be imported ({e})") from e
    return integrity


def cmd_verify(args: argparse.Namespace) -> int:
    problems = _integrity().verify(args.directory)
    for p in problems:
        print(f"{p.path}: {p.message}")
    if problems:
        raise CommandError(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found "
                           f"in {args.directory}")
    say(args, f"{args.directory}: no problems found")
    return EXIT_OK


def _report(args: argparse.Namespace, lines: list[str], what: str) -> int:
    """Says each line of what a rewriting command did, or that there was nothing to do."""
    for line in lines:
        say(args, line)
    if not lines:
        say(args, f"{args.directory}: nothing to {what}")
    return EXIT_OK


def cmd_repair(args: argparse.Namespace) -> int:
    actions = _integrity().repair(args.directory)
    return _report(args, actions, "repair")


def cmd_compress(args: argparse.Namespace) -> int:
    from ..format.codecs import Zstd
    from ..integrity.recompress import compress

    try:
        codec = Zstd(level=args.level, chunk_rows=args.chunk_rows, delta=args.delta)
    except ValueError as e:
        raise CommandError(str(e)) from e
    lines = compress(args.directory, codec, grace=args.grace)
    return _report(args, lines, "compress")


def cmd_decompress(args: argparse.Namespace) -> int:
    from ..integrity.recompress import decompress

    lines = decompress(args.directory, grace=args.grace)
    return _report(args, lines, "decompress")


def cmd_push(args: argparse.Namespace) -> int:
    from ..integrations.cloud import push

    result = push(args.directory, args.url, storage_options=args.storage_options,
                  progress=None if args.quiet else print)
    say(args, f"pushed {args.directory} to {result.url}: "
               f"{count(result.uploaded, 'file')} uploaded, {result.skipped} already there, "
               f"{count(result.manifests, 'manifest')} written, "
               f"{count(result.bytes_uploaded, 'byte')}")
    return EXIT_OK


def cmd_view(args: argparse.Namespace) -> int:
    from ..integrations.view import run

    return run(args.directory, host=args.host, port=args.port,
               open_browser=not args.no_browser)
