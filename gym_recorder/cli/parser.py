"""The ``gym-recorder`` parser: every command's arguments, help and examples (:func:`build_parser`).

Each subcommand names the function that runs it (``args.func``, in :mod:`.record`,
:mod:`.inspect`, :mod:`.play` and :mod:`.edit`); argument types check their text here, so a bad
value is a usage error (exit status 2) before anything runs.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from .._version import __version__
from .inspect import (cmd_compress, cmd_decompress, cmd_export, cmd_import_minari, cmd_info,
                      cmd_plot, cmd_push, cmd_repair, cmd_verify, cmd_view)
from .argtypes import json_object, key_value, non_negative_int, pixels, positive_int, wrapper
from .output import MB, PROG
from .output import positive_float as _positive_float
from .play import add_play_parser
from .edit import add_edit_parsers
from .record import DEFAULT_EPISODES, cmd_record, cmd_replay, cmd_video
from ..integrity.recompress import DEFAULT_GRACE
from ..integrations.export import DEFAULT_FPS, DEFAULT_PLOT_DPI, DEFAULT_PLOT_SIZE
from ..integrations.parquet import DEFAULT_MAX_FILE_BYTES
from ..integrations.view import DEFAULT_HOST, DEFAULT_PORT
from ..record.wrapper import DEFAULT_FLUSH_INTERVAL, DEFAULT_TARGET_BATCH_BYTES
from ..format.codecs import DEFAULT_CHUNK_ROWS, DEFAULT_DELTA, DEFAULT_LEVEL

codec_defaults: dict[str, Any] = {"level": DEFAULT_LEVEL, "chunk_rows": DEFAULT_CHUNK_ROWS,
                                  "delta": DEFAULT_DELTA}

__all__ = ["build_parser", "add_training_parsers", "DEFAULT_TABLE_LIMIT"]

# Episodes shown by `info` unless --limit says otherwise (the first and last halves).
DEFAULT_TABLE_LIMIT = 20


def _add_env_options(p: argparse.ArgumentParser, kwargs: bool) -> None:
    """--import (record, replay, video) and --env-kwargs (replay, video)."""
    p.add_argument("--import", dest="imports", action="append", metavar="MODULE",
                   help="import MODULE first (repeatable): a package that registers the env "
                        "or defines its wrappers")
    if kwargs:
        p.add_argument("--env-kwargs", type=json_object, default=None, metavar="JSON",
                       help="env keyword arguments the recording could not keep (or to "
                            "override), as a JSON object")
        p.add_argument("--skip-wrapper", dest="skip_wrappers", action="append", default=[],
                       metavar="NAME",
                       help="leave the recorded wrapper NAME out (repeatable): one that changes "
                            "no observation, reward or action (e.g. an info-only Monitor) and "
                            "cannot be rebuilt")


def _add_grace(p: argparse.ArgumentParser) -> None:
    """``--grace`` of the commands that rewrite batches (``compress``, ``decompress``)."""
    p.add_argument("--grace", type=float, default=DEFAULT_GRACE, metavar="SECONDS",
                   help=f"keep the old batch files this long after the commit (default "
                        f"{DEFAULT_GRACE:g})")


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``gym-recorder`` and its subcommands."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=fmt,
        description="Record Gymnasium environments, and inspect, check, plot, film and export "
                    "recordings.",
        epilog=_examples(
            "gym-recorder record CartPole-v1 --episodes 10 --directory rec --seed 0",
            "gym-recorder info rec",
            "gym-recorder replay rec",
            "gym-recorder COMMAND --help"))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--traceback", action="store_true",
                        help="show the full traceback of an error (for bug reports)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--quiet", "-q", action="store_true",
                        help="print nothing on success (errors still go to stderr)")
    # Also after COMMAND; SUPPRESS keeps the subcommand from resetting a --traceback given before.
    common.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback of an error (for bug reports)")

    def add(name: str, func: Any, help: str, description: str, epilog: str
            ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=textwrap.fill(description, 78),
                           epilog=epilog,
                           parents=[common], formatter_class=fmt)
        p.set_defaults(func=func)
        return p

    p = add("record", cmd_record, "record episodes of an env",
            "Record a registered Gymnasium env driven by a random policy (or --policy). The "
            "first reset is seeded with --seed, later ones are not, so `replay` can reproduce "
            "the run. Ctrl-C stops cleanly: everything recorded so far is kept (exit status "
            "130).",
            _examples(
                "gym-recorder record CartPole-v1 --episodes 10 --directory rec --seed 0",
                "gym-recorder record Pendulum-v1 --steps 5000 -d rec/pendulum",
                "gym-recorder record CartPole-v1 -d rec --policy mypolicies:balance",
                "gym-recorder record CartPole-v1 -d rec --env-kwargs "
                "'{\"render_mode\": \"rgb_array\"}'",
                "gym-recorder record CartPole-v1 -d rec --num-envs 4 --episodes 100",
                "gym-recorder record ALE/Breakout-v5 -d rec --import ale_py --env-kwargs "
                "'{\"frameskip\": 1}' --wrapper AtariPreprocessing --wrapper "
                "FrameStackObservation:stack_size=4",
                "gym-recorder record CartPole-v1 -d rec --meta author=me --meta notes='first try'",
                "gym-recorder record pettingzoo.classic.tictactoe_v3:env -d rec  # PettingZoo"))
    p.add_argument("env_id", help="a registered env id, e.g. CartPole-v1 (gymnasium's "
                                  "'module:EnvId' imports module first), or a PettingZoo env's "
                                  "'module:function' (AEC or Parallel; --policy then gets "
                                  "(observation, agent))")
    p.add_argument("--directory", "-d", required=True, metavar="DIR",
                   help="the recording directory (created if missing)")
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--episodes", "-n", type=positive_int, metavar="N",
                      help=f"stop after this many episodes ended (default {DEFAULT_EPISODES})")
    stop.add_argument("--steps", type=positive_int, metavar="N",
                      help="stop after this many steps (the open episode ends with 'close')")
    p.add_argument("--seed", type=int, metavar="S",
                   help="seed of the first reset and of the random policy (default: a random "
                        "seed, printed)")
    p.add_argument("--policy", metavar="MODULE:CALLABLE",
                   help="callable(observation) -> action, imported from MODULE (or a file "
                        "path.py); default: sample the action space")
    p.add_argument("--env-kwargs", type=json_object, default=None, metavar="JSON",
                   help="keyword arguments for gymnasium.make, as a JSON object")
    p.add_argument("--num-envs", type=positive_int, metavar="K",
                   help="record a vector env of K copies (episodes and steps count all copies; "
                        "the policy gets and returns batches)")
    p.add_argument("--target-batch-bytes", type=positive_int, default=DEFAULT_TARGET_BATCH_BYTES,
                   metavar="BYTES", help=f"aim for batch files of about this size (default "
                                         f"{DEFAULT_TARGET_BATCH_BYTES / MB:g} MB)")
    p.add_argument("--flush-interval", type=_positive_float, default=DEFAULT_FLUSH_INTERVAL,
                   metavar="SECONDS", help=f"commit buffered steps at least this often (default "
                                           f"{DEFAULT_FLUSH_INTERVAL:g})")
    p.add_argument("--file-prefix", metavar="PREFIX",
                   help="the writer's file prefix (default: unique)")
    p.add_argument("--compress", action="store_true",
                   help="store big leaves (images) zstd-compressed: lossless, random access "
                        "(needs the zstd extra; see `gym-recorder compress --help` for options)")
    p.add_argument("--wrapper", dest="wrappers", type=wrapper, action="append", default=[],
                   metavar="NAME[:KEY=VALUE,...]",
                   help="wrap the env (repeatable, innermost first) in a gymnasium.wrappers "
                        "class, or module.Class, with keyword arguments (values in JSON), e.g. "
                        "--wrapper AtariPreprocessing:noop_max=0 --wrapper "
                        "FrameStackObservation:stack_size=4; replay rebuilds them")
    p.add_argument("--meta", type=key_value, action="append", metavar="KEY=VALUE",
                   help="who or what made the recording (repeatable), e.g. --meta author=me "
                        "--meta algorithm_name=random: shown by info, exported to Minari "
                        "and Parquet")
    _add_env_options(p, kwargs=False)

    p = add("info", cmd_info, "summarise a recording",
            "Show a recording's env id, spaces, episodes, steps, returns, writers, bytes on "
            "disk, and a table of episodes.",
            _examples("gym-recorder info rec",
                      "gym-recorder info rec --limit 0     # every episode",
                      "gym-recorder info rec --json | jq .total_reward_mean"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (with every episode) instead of text")
    p.add_argument("--limit", type=non_negative_int, default=DEFAULT_TABLE_LIMIT, metavar="N",
                   help=f"show at most N episodes in the table, the first and the last ones "
                        f"(default {DEFAULT_TABLE_LIMIT}; 0 shows all)")
    p.add_argument("--deleted", action="store_true",
                   help="list the episodes edits deleted, with the indices `edit DIR restore` "
                        "takes")

    p = add("replay", cmd_replay, "re-run the env with the recorded seeds and actions",
            "A determinism check: make the recorded env again, reset it with each episode's "
            "recorded seed and options, step it with the recorded actions, and compare "
            "observations, rewards, terminations and truncations exactly. Exit status 1 if any "
            "episode differs (the first differing step is named: step 0 is the reset, step 1 "
            "the first env.step, up to the episode's length) or nothing could be checked.",
            _examples("gym-recorder replay rec",
                      "gym-recorder replay rec --episode 3 --episode 4",
                      "gym-recorder replay rec --quiet && echo deterministic"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--episode", "-e", type=int, action="append", metavar="I",
                   help="check only episode I (repeatable; earlier episodes are replayed as "
                        "far as needed)")
    _add_env_options(p, kwargs=True)

    p = add("plot", cmd_plot, "plot episode return and length (needs the [plot] extra)",
            "Plot the return and the length of every episode. The file type follows the "
            "suffix of --output (png, svg, pdf).",
            _examples("gym-recorder plot rec -o returns.png",
                      "gym-recorder plot rec -o returns.svg --size 1600x900"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--output", "-o", required=True, help="the image file to write")
    p.add_argument("--size", type=pixels, default=DEFAULT_PLOT_SIZE, metavar="WxH",
                   help="image size in pixels (default {}x{})".format(*DEFAULT_PLOT_SIZE))
    p.add_argument("--dpi", type=positive_int, default=DEFAULT_PLOT_DPI,
                   help=f"resolution (default {DEFAULT_PLOT_DPI})")

    p = add("video", cmd_video, "film an episode (needs the [video] extra)",
            "Write one episode as a video: from its image observations (uint8 H x W x 3, also "
            "inside a Dict), or if there are none by replaying the env with "
            "render_mode='rgb_array'. mp4 or gif, by the suffix of --output. One frame per "
            "observation (the reset observation first). Frames go to the encoder as they are "
            "rendered (bounded memory), with progress on stderr. MuJoCo envs render without a "
            "display through EGL: MUJOCO_GL=egl is set when there is no DISPLAY (Debian "
            "packages libegl1 and libgl1-mesa-dri).",
            _examples("gym-recorder video rec -o episode0.mp4",
                      "gym-recorder video rec -o last.gif --episode -1 --fps 15",
                      "gym-recorder video rec -o cam.mp4 --key camera/rgb"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--output", "-o", required=True, help="the .mp4 or .gif file to write")
    p.add_argument("--episode", "-e", type=int, default=0, metavar="I",
                   help="the episode (default 0; negative counts from the end)")
    p.add_argument("--fps", type=_positive_float,
                   help=f"frames per second (default: the env's render_fps, else "
                        f"{DEFAULT_FPS:g})")
    p.add_argument("--key", help="the Dict observation leaf holding the images, e.g. 'pixels'")
    p.add_argument("--source", choices=("auto", "observations", "render"), default="auto",
                   help="where frames come from (default auto: observations if they are "
                        "images, else render)")
    _add_env_options(p, kwargs=True)

    p = add("export", cmd_export, "write all episodes into one flat file",
            "Concatenate every episode into one .npz: observations (N+1 rows per episode), "
            "actions, rewards, terminations, truncations (N rows per episode), and "
            "episode_starts, episode_lengths, observation_starts, episode_seeds, "
            "episode_sub_envs. Dict and Tuple leaves get names like observations/position. "
            "docs/cli.md (export) shows how to index them. --format parquet writes a Hugging Face "
            "dataset folder (data/*.parquet, README.md, gym_recorder.json) and --format minari "
            "a Minari dataset into Minari's root (docs/training.md).",
            _examples("gym-recorder export rec --format npz -o rec.npz",
                      "gym-recorder export rec --format parquet -o rec_parquet",
                      "gym-recorder export rec --format minari --dataset-id me/cartpole-v0",
                      "python -c \"import numpy as np; d = np.load('rec.npz'); "
                      "print(d['rewards'][d['episode_starts'][1]])\""))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--format", "-f", choices=("npz", "parquet", "minari"), default="npz",
                   help="output format (default npz); parquet: a Hugging Face dataset folder "
                        "(needs gymnasium-recorder[arrow]); minari: a Minari dataset in Minari's root "
                        "(needs gymnasium-recorder[minari])")
    p.add_argument("--output", "-o",
                   help="the file (npz) or folder (parquet) to write; not for minari")
    p.add_argument("--dataset-id", metavar="NS/NAME-vN", help="the Minari dataset id (minari)")
    p.add_argument("--max-file-bytes", type=positive_int, default=DEFAULT_MAX_FILE_BYTES,
                   metavar="BYTES",
                   help=f"largest Parquet file, in bytes of column data (default "
                        f"{DEFAULT_MAX_FILE_BYTES >> 20} MiB)")
    p.add_argument("--compress", action="store_true", help="compress the arrays (zip deflate)")
    p.add_argument("--no-infos", action="store_true",
                   help="parquet: leave the numeric info columns out (reading the infos is a "
                        "pass of its own over the episodes)")
    p.add_argument("--env", metavar="ID",
                   help="export only the episodes of this env id (needed when the directory "
                        "holds several envs)")
    p.add_argument("--import", dest="imports", action="append", metavar="MODULE",
                   help="import MODULE first (repeatable; minari): a package that registers the "
                        "env, so that its spec is exported (the recorded env module is tried "
                        "by itself)")
    p.add_argument("--agent", metavar="NAME",
                   help="parquet, multi-agent (PettingZoo) recordings: only this agent's "
                        "transitions (default: every agent's, with an agent column, when "
                        "their spaces agree)")

    p = add("verify", cmd_verify, "check every file of a recording",
            "Check every manifest, batch file and array (sizes, checksums) of a recording; "
            "print one line 'path: message' per problem. Exit status 1 if there is any.",
            _examples("gym-recorder verify rec"))
    p.add_argument("directory", help="the recording directory")

    p = add("repair", cmd_repair, "make a damaged recording readable again",
            "Move aside what cannot be read (e.g. batches lost in a power failure) so that "
            "everything else reads; print one line per action taken.",
            _examples("gym-recorder repair rec && gym-recorder verify rec"))
    p.add_argument("directory", help="the recording directory")

    p = add("compress", cmd_compress, "store a recording's big leaves zstd-compressed",
            "Rewrite a recording's batches with its image-like leaves (64 bytes a row or more) "
            "zstd-compressed in chunks of rows: lossless, random access, format version 2 "
            "(needs the zstd extra). Crash-safe and safe beside readers: new batch files, one "
            "manifest commit per writer, the old files deleted after --grace seconds. Do not "
            "run it on a writer that is still recording.",
            _examples("gym-recorder compress rec && gym-recorder info rec"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--level", type=int, default=codec_defaults["level"], metavar="L",
                   help=f"zstd level (default {codec_defaults['level']})")
    p.add_argument("--chunk-rows", type=positive_int, default=codec_defaults["chunk_rows"],
                   metavar="N", help="rows per compressed chunk (default: as many as make "
                                     "about 800 KB, at most 64)")
    p.add_argument("--delta", choices=("auto", "none", "xor", "sub"),
                   default=codec_defaults["delta"],
                   help=f"delta coding of rows within a chunk (default "
                        f"{codec_defaults['delta']})")
    _add_grace(p)
    p = add("decompress", cmd_decompress, "store every array of a recording raw again",
            "Rewrite a recording's compressed batches with every array raw (format version "
            "1): np.fromfile loads every array at the offset its JSON names. Crash-safe, as "
            "compress.",
            _examples("gym-recorder decompress rec"))
    p.add_argument("directory", help="the recording directory")
    _add_grace(p)

    p = add("view", cmd_view, "look at a recording in the browser",
            "Serve a page that shows the episodes of a recording (table, charts, frames) and "
            "the recording's files, read-only, and open it in the browser. The URL is the first "
            "line printed. The page reads the raw files itself; reload it (or press its "
            "refresh button) to see batches committed since. Ctrl-C stops the server.",
            _examples("gym-recorder view rec",
                      "gym-recorder view rec --port 8000 --no-browser"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("--port", type=int, default=None, metavar="P",
                   help=f"the port (default {DEFAULT_PORT}, or the next free one when it is in "
                        "use; 0 picks any free one)")
    p.add_argument("--host", default=DEFAULT_HOST, metavar="H",
                   help=f"the address to bind (default {DEFAULT_HOST}: this machine only)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")

    p = add("push", cmd_push, "upload a recording to object storage (needs gymnasium-recorder[cloud])",
            "Upload a recording to any fsspec URL (s3://, gs://, file://...), incrementally: "
            "batches the URL does not hold yet first, then the manifests, so that a reader of "
            "the URL never sees a manifest naming a missing batch, and an interrupted push "
            "leaves it readable. A re-run uploads only what is new. The standard environment "
            "of the filesystem applies (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...).",
            _examples("gym-recorder push rec s3://bucket/rec",
                      "gym-recorder push rec s3://bucket/rec --storage-options "
                      "'{\"endpoint_url\": \"http://127.0.0.1:9000\"}'"))
    p.add_argument("directory", help="the recording directory")
    p.add_argument("url", help="the destination URL")
    p.add_argument("--storage-options", type=json_object, default=None, metavar="JSON",
                   help="a JSON object of options for the fsspec filesystem")
    add_training_parsers(add)
    add_play_parser(add, _examples, _add_env_options)
    add_edit_parsers(add, _examples)
    return parser


def add_training_parsers(add: Any) -> None:
    """Adds ``import-minari`` (``export --format parquet|minari`` extends ``export``)."""
    p = add("import-minari", cmd_import_minari, "read a Minari dataset into a new recording "
            "(needs gymnasium-recorder[minari])",
            "Read every episode of a Minari dataset (an id in Minari's local root, "
            "MINARI_DATASETS_PATH honoured, or the path of a dataset's folder, the one holding "
            "data/) into a new recording directory, bit-exact, with seeds, options and infos.",
            _examples("gym-recorder import-minari D4RL/door/human-v2 rec/door",
                      "gym-recorder import-minari ~/.minari/datasets/me/cartpole-v0 rec/cp"))
    p.add_argument("dataset", help="a Minari dataset id or folder")
    p.add_argument("directory", help="the recording directory to create (must not exist)")
