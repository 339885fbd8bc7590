"""The ``gym-recorder`` command line, driven as a user would: outputs are checked themselves.

A few tests run ``python -m gym_recorder`` in a subprocess (end to end, Ctrl-C); the rest call
``cli.main([...])`` and read stdout/stderr with capsys.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder import cli
from conftest import MissionLike

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ("record", "info", "replay", "plot", "video", "export", "verify", "repair",
            "play", "edit", "merge", "split", "compact")


def run_cli(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs ``python -m gym_recorder ARGS`` with the source tree importable."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-m", "gym_recorder", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def record(directory: Path, env_id: str = "CartPole-v1", *extra: str) -> None:
    if not any(a in ("--steps", "--episodes") for a in extra):
        extra = ("--episodes", "3", *extra)
    assert cli.main(["record", env_id, "-d", str(directory), "--seed", "0", "-q", *extra]) == 0


def error_lines(capsys) -> list[str]:
    return capsys.readouterr().err.splitlines()


@pytest.fixture
def cartpole(tmp_path) -> Path:
    d = tmp_path / "cartpole"
    record(d, "CartPole-v1", "--episodes", "4")
    return d


# -- help, usage -------------------------------------------------------------------------------

@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_examples(command, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: gym-recorder {command}")
    assert "examples:\n  gym-recorder " + command in out
    assert "--quiet" in out


def test_usage_error_exits_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["record", "CartPole-v1", "-d", str(tmp_path), "--env-kwargs", "[1]"])
    assert e.value.code == 2
    assert "--env-kwargs: must be a JSON object" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli.main(["record", "CartPole-v1", "-d", str(tmp_path), "--episodes", "2",
                  "--steps", "5"])
    assert e.value.code == 2


# -- end to end in a subprocess ------------------------------------------------------------------

def test_record_info_replay_end_to_end(tmp_path):
    d = tmp_path / "rec"
    r = run_cli("record", "CartPole-v1", "--episodes", "5", "--directory", "rec", "--seed", "0",
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("recorded 5 episodes, ") and "seed 0" in r.stdout
    assert r.stderr == ""  # not a TTY: no progress bar
    r = run_cli("info", "rec", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    with RecordingReader(d) as reader:
        episodes = list(reader)
    assert info["env_id"] == "CartPole-v1" and info["episodes"] == 5 == len(episodes)
    assert info["steps"] == sum(ep.length for ep in episodes)
    assert [row["total_reward"] for row in info["episode_table"]] == [ep.total_reward
                                                               for ep in episodes]
    assert [row["seed"] for row in info["episode_table"]] == [0, None, None, None, None]
    assert info["ends"] == {"terminated": 5}
    assert info["bytes"] == sum(f.stat().st_size for f in d.iterdir())
    r = run_cli("replay", "rec", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "5 episodes replayed: 5 match, 0 mismatch, 0 skipped"


def test_bad_directory_one_line_on_stderr_subprocess(tmp_path):
    r = run_cli("info", "missing", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.splitlines() == ["gym-recorder info: error: missing: no such directory"]
    assert r.stdout == ""


BAD_DIRECTORY_CASES = [
    pytest.param(argv, damage, id=f"{argv[0]}{'-json' if '--json' in argv else ''}-{damage}")
    for argv in (["info", "{d}"], ["info", "{d}", "--json"], ["replay", "{d}"],
                 ["plot", "{d}", "-o", "{out}.png"], ["video", "{d}", "-o", "{out}.gif"],
                 ["export", "{d}", "-o", "{out}.npz"], ["verify", "{d}"], ["repair", "{d}"])
    for damage in ("missing", "garbage")
    # repair of a lone unparseable manifest reports it cannot rebuild it (tested below)
    if (argv[0], damage) != ("repair", "garbage")]


@pytest.mark.parametrize("argv, damage", BAD_DIRECTORY_CASES)
def test_bad_directory_one_line_and_nonzero(argv, damage, tmp_path, capsys):
    d = tmp_path / "rec"
    if damage == "garbage":
        d.mkdir()
        (d / "w.manifest.json").write_text("{not json")
    status = cli.main([a.format(d=d, out=tmp_path / "out") for a in argv])
    captured = capsys.readouterr()
    assert status == 1
    assert len(captured.err.splitlines()) == 1, captured.err
    assert captured.err.startswith(f"gym-recorder {argv[0]}: error: ")
    assert "Traceback" not in captured.err
    assert not list(tmp_path.glob("out.*"))  # nothing half-written


# -- record ------------------------------------------------------------------------------------

def test_record_steps_stops_exactly(tmp_path, capsys):
    d = tmp_path / "rec"
    assert cli.main(["record", "sample_envs/FixedLength-v0", "-d", str(d), "--steps", "25",
                     "--seed", "3", "--env-kwargs", '{"episode_length": 10}']) == 0
    assert capsys.readouterr().out.startswith("recorded 2 episodes + 1 unfinished (end 'close'), "
                                              "25 steps of sample_envs/FixedLength-v0")
    with RecordingReader(d) as reader:
        assert [ep.length for ep in reader] == [10, 10, 5]
        assert [ep.end for ep in reader] == ["terminated", "terminated", "close"]
        assert [ep.seed for ep in reader] == [3, None, None]


def test_record_env_kwargs_and_random_seed(tmp_path, capsys):
    d = tmp_path / "rec"
    assert cli.main(["record", "sample_envs/Image-v0", "-d", str(d), "--episodes", "1",
                     "--env-kwargs", '{"height": 6, "width": 10, "episode_length": 4}']) == 0
    out = capsys.readouterr().out
    seed = int(out.split("(seed ")[1].split(",")[0])  # a random seed, printed and recorded
    with RecordingReader(d) as reader:
        ep = reader[0]
        assert ep.observations.shape == (5, 6, 10, 3) and ep.observations.dtype == np.uint8
        assert ep.seed == seed
        assert reader.writers[0]["manifest"]["env_spec"]["kwargs"]["height"] == 6


def test_record_policy_from_module_and_file(tmp_path, monkeypatch, capsys):
    (tmp_path / "mypolicies.py").write_text(textwrap.dedent("""
        import numpy as np
        calls = []
        def always_one(obs):
            assert obs.shape == (4,)
            return 1
        class Agent:
            @staticmethod
            def act(obs):
                return np.int64(0)
    """))
    monkeypatch.chdir(tmp_path)  # like `python -m`: modules in the current directory import
    monkeypatch.setattr(sys, "path", [*sys.path])  # load_policy adds the current directory
    monkeypatch.delitem(sys.modules, "mypolicies", raising=False)
    record(tmp_path / "a", "CartPole-v1", "--policy", "mypolicies:always_one")
    record(tmp_path / "b", "CartPole-v1", "--policy", f"{tmp_path / 'mypolicies.py'}:Agent.act")
    with RecordingReader(tmp_path / "a") as a, RecordingReader(tmp_path / "b") as b:
        assert len(a) == len(b) == 3
        assert all((ep.actions == 1).all() and ep.length > 0 for ep in a)
        assert all((ep.actions == 0).all() and ep.length > 0 for ep in b)
    for bad, message in [("mypolicies:nothing", "policy module 'mypolicies' has no 'nothing'"),
                         ("no_such_module_xyz:f", "cannot import policy module"),
                         ("mypolicies", "must look like 'module:callable'")]:
        assert cli.main(["record", "CartPole-v1", "-d", str(tmp_path / "c"), "--policy",
                         bad]) == 1
        lines = error_lines(capsys)
        assert len(lines) == 1 and message in lines[0], lines


def test_record_unknown_env_one_line(tmp_path, capsys):
    assert cli.main(["record", "NoSuchEnv-v0", "-d", str(tmp_path / "r")]) == 1
    lines = error_lines(capsys)
    assert len(lines) == 1 and "cannot make env 'NoSuchEnv-v0'" in lines[0]


def test_record_unregistered_env_suggests_import(tmp_path, capsys):
    """ale_py, minigrid, highway_env register their ids only when imported: 'ALE/Pong-v5' said
    "Namespace ALE not found. Have you installed the proper package for ALE?" though it was
    installed. The line says to pass --import; another cause of failure gets no such hint."""
    for env_id in ("NoSuchNamespace/Game-v5", "NoSuchEnv-v0"):
        assert cli.main(["record", env_id, "-d", str(tmp_path / "r"), "--steps", "2"]) == 1
        lines = error_lines(capsys)
        assert len(lines) == 1 and "pass --import PACKAGE" in lines[0], lines
    assert cli.main(["record", "CartPole-v1", "-d", str(tmp_path / "r"), "--steps", "2",
                     "--env-kwargs", '{"no_such_kwarg": 1}']) == 1
    lines = error_lines(capsys)
    assert len(lines) == 1 and "--import" not in lines[0], lines


def test_record_vector_env_and_replay(tmp_path, capsys):
    pytest.importorskip("gym_recorder.record.vector", reason="gym_recorder.record.vector not written yet")
    d = tmp_path / "vec"
    assert cli.main(["record", "CartPole-v1", "-d", str(d), "--num-envs", "3", "--episodes",
                     "6", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    with RecordingReader(d) as reader:
        episodes = list(reader)
    assert reader.writers[0]["manifest"]["vector"]["num_envs"] == 3
    ended = [ep for ep in episodes if ep.end == "terminated" or ep.end == "truncated"]
    assert len(ended) >= 6 and out.startswith(f"recorded {len(ended)} episodes")
    assert {ep.sub_env for ep in episodes} == {0, 1, 2}
    assert sorted(ep.seed for ep in episodes if ep.seed is not None) == [5, 6, 7]
    assert cli.main(["replay", str(d)]) == 0
    out = capsys.readouterr().out
    assert f"{len(episodes)} episodes replayed: {len(episodes)} match" in out
    assert "(sub-env 2): match" in out


def test_ctrl_c_keeps_everything_recorded(tmp_path):
    d = tmp_path / "rec"
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gym_recorder", "record", "CartPole-v1", "-d", str(d),
         "--episodes", "10000000", "--seed", "0", "--target-batch-bytes", "20000",
         "--flush-interval", "0.2"], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # wait until at least one batch is committed
            manifests = glob.glob(str(d / "*.manifest.json"))
            if manifests:
                try:
                    if json.loads(Path(manifests[0]).read_text())["batches"]:
                        break
                except (ValueError, KeyError):
                    pass  # being replaced right now
            time.sleep(0.05)
        else:
            pytest.fail("record wrote nothing within 30 s")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gym-recorder record: interrupted; kept "), err
    ended = int(lines[0].split("kept ")[1].split(" episodes")[0])
    with RecordingReader(d) as reader:
        assert reader.writers[0]["complete"] is True  # the wrapper was closed
        episodes = list(reader)  # everything reads back
    assert len(episodes) == ended + 1 and ended >= 1
    assert all(ep.end == "terminated" for ep in episodes[:-1])
    assert episodes[-1].end == "close"
    assert all(len(ep.observations) == ep.length + 1 for ep in episodes)


# -- info ----------------------------------------------------------------------------------------

def test_info_table_and_totals(cartpole, capsys):
    with RecordingReader(cartpole) as reader:
        episodes = list(reader)
        prefix = reader.writers[0]["prefix"]
    assert cli.main(["info", str(cartpole)]) == 0
    out = capsys.readouterr().out
    assert "env id             CartPole-v1" in out
    assert "action space       Discrete(2)" in out
    assert f"steps              {sum(ep.length for ep in episodes)}" in out
    assert f"{prefix}  4 episodes, 1 batch, complete" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split() == [
        "episode", "length", "total_reward", "end", "seed", "sub_env", "writer"])
    rows = [line.split() for line in lines[header + 1:]]
    assert rows == [[str(ep.index), str(ep.length), f"{ep.total_reward:.6g}", "terminated",
                     "0" if ep.index == 0 else "-", "-", "0"] for ep in episodes]
    assert cli.main(["info", str(cartpole), "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "(2 episodes not shown; --limit 0 shows all)"
    assert cli.main(["info", str(cartpole), "-q"]) == 0
    assert capsys.readouterr().out == ""


# -- replay ------------------------------------------------------------------------------------

def change_action(directory: Path, episode: int, step: int) -> None:
    """Flips one recorded Discrete(2) action in place, keeping every checksum consistent."""
    (manifest_path,) = directory.glob("*.manifest.json")
    manifest = json.loads(manifest_path.read_text())
    (batch,) = manifest["batches"]
    batch_path = directory / batch["fn"]
    doc = json.loads(batch_path.read_text())
    (entry,) = [e for e in doc["episodes"] if e["episode"] == episode]
    ref = entry["actions"]
    assert ref["dtype"] == "<i8"
    with open(directory / ref["npyfile"], "r+b") as f:
        f.seek(ref["npyoff"])
        actions = np.frombuffer(f.read(ref["size"]), dtype="<i8").copy()
        actions[step] = 1 - actions[step]
        f.seek(ref["npyoff"])
        f.write(actions.tobytes())
    ref["crc32"] = zlib.crc32(actions.tobytes())
    data = json.dumps(doc).encode()
    batch_path.write_bytes(data)
    batch["json_size"], batch["json_crc32"] = len(data), zlib.crc32(data)
    manifest_path.write_text(json.dumps(manifest))


def test_replay_fails_when_an_action_is_changed(cartpole, capsys):
    change_action(cartpole, episode=1, step=2)
    with RecordingReader(cartpole, verify=True) as reader:  # the recording itself is sound
        assert reader[1].actions[2] in (0, 1)
    assert cli.main(["replay", str(cartpole)]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("episode 0: match")
    assert lines[1].startswith("episode 1: MISMATCH at step 3 of ")
    assert "observation" in lines[1]
    # the later, unseeded episodes depend on the env's state, which diverged
    assert lines[2] == "episode 2: skipped: its env diverged from the recording in episode 1"
    err = captured.err.splitlines()
    assert err == ["gym-recorder replay: error: 4 episodes replayed: 1 match, 1 mismatch, "
                   "2 skipped (first: episode 1 at step 3)"]
    assert cli.main(["replay", str(cartpole), "--episode", "0", "-q"]) == 0
    assert capsys.readouterr().out == ""


def test_replay_nested_dict_env_and_selected_episodes(tmp_path, capsys):
    d = tmp_path / "nested"
    record(d, "sample_envs/NestedDict-v0", "--episodes", "4")
    assert cli.main(["replay", str(d), "-e", "2", "-e", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out[:2]] == ["episode 2", "episode 3"]
    assert out[-1] == "2 episodes replayed: 2 match, 0 mismatch, 0 skipped"


def test_replay_without_env_id_checks_nothing(tmp_path, capsys):
    from sample_envs import FixedLengthEnv

    with RecordingWrapper(FixedLengthEnv(episode_length=3), tmp_path) as env:  # no spec
        env.reset(seed=0)
        for _ in range(3):
            env.step(0)
    assert cli.main(["replay", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "episode 0: skipped: the recording has no env id" in captured.out
    assert captured.err.splitlines() == [
        "gym-recorder replay: error: 1 episode replayed: 0 match, 0 mismatch, 1 skipped: "
        "nothing could be checked"]


# -- plot --------------------------------------------------------------------------------------

def test_plot_png_decodes_with_the_requested_size(cartpole, tmp_path, capsys):
    image = pytest.importorskip("matplotlib.image")
    out = tmp_path / "returns.png"
    assert cli.main(["plot", str(cartpole), "-o", str(out), "--size", "640x360"]) == 0
    assert capsys.readouterr().out == f"wrote {out}: total reward and length of 4 episodes " \
                                      f"(640x360 pixels)\n"
    pixels = image.imread(out)
    assert pixels.shape == (360, 640, 4)
    assert pixels[..., :3].std() > 0.05  # something is drawn


def test_missing_extra_names_it(cartpole, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    assert cli.main(["plot", str(cartpole), "-o", str(tmp_path / "r.png")]) == 1
    # The command named is the checkout's: gymnasium-recorder is not on the package index yet,
    # where `pip install 'gymnasium-recorder[plot]'` says "No matching distribution found".
    assert error_lines(capsys) == ["gym-recorder plot: error: matplotlib is not installed; "
                                   'install it with: python -m pip install ".[plot]" in the '
                                   "gym_recorder checkout (gymnasium-recorder[plot] once it is "
                                   "published)"]


def test_missing_cloud_extra_names_the_checkout_install(cartpole, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "fsspec", None)  # import fails
    monkeypatch.delitem(sys.modules, "gym_recorder.integrations.cloud", raising=False)
    # (and the package's attribute: the import below rebinds it, and other tests' readers must
    # find the module they imported afterwards)
    import gym_recorder.integrations as integrations
    monkeypatch.delattr(integrations, "cloud", raising=False)
    assert cli.main(["push", str(cartpole), "file:///nowhere/x"]) == 1
    (line,) = error_lines(capsys)
    assert 'python -m pip install ".[cloud]" in the gym_recorder checkout' in line, line


# -- video -------------------------------------------------------------------------------------

POLICY_ZERO = "import numpy as np\ndef zero(obs):\n    return 0\n"


@pytest.fixture
def images(tmp_path, monkeypatch) -> Path:
    """Image-v0 episodes with action 0: frame t % 8 at step t, so consecutive frames differ."""
    (tmp_path / "zero_policy.py").write_text(POLICY_ZERO)
    monkeypatch.syspath_prepend(str(tmp_path))
    d = tmp_path / "images"
    record(d, "sample_envs/Image-v0", "--episodes", "2", "--policy", "zero_policy:zero",
           "--env-kwargs", '{"height": 24, "width": 32, "episode_length": 9}')
    return d


def test_video_gif_from_image_observations(images, tmp_path, capsys):
    iio = pytest.importorskip("imageio.v3")
    out = tmp_path / "ep.gif"
    assert cli.main(["video", str(images), "-o", str(out), "--episode", "-1", "--fps", "10"]) == 0
    assert capsys.readouterr().out == f"wrote {out}: 10 frames of episode 1 from observations, " \
                                      f"10 fps\n"
    frames = iio.imread(out, index=None)
    assert frames.shape[:3] == (10, 24, 32)  # one frame per observation
    with RecordingReader(images) as reader:
        obs = reader[1].observations
    # gif is palette-based: compare coarsely, frame by frame, in order
    errors = np.abs(frames[..., :3].astype(int) - obs.astype(int)).mean(axis=(1, 2, 3))
    assert (errors < 8).all(), errors


def test_video_mp4_from_image_observations(images, tmp_path, capsys):
    pytest.importorskip("imageio_ffmpeg")
    import imageio.v2 as iio2

    out = tmp_path / "ep.mp4"
    assert cli.main(["video", str(images), "-o", str(out), "-q"]) == 0
    with iio2.get_reader(out) as reader:
        assert reader.count_frames() == 10
        assert reader.get_data(0).shape == (24, 32, 3)


def test_video_from_dict_observation_leaf(tmp_path, capsys):
    iio = pytest.importorskip("imageio.v3")
    import sample_envs  # noqa: F401

    inner = gym.make("sample_envs/Image-v0", height=8, width=12, episode_length=5,
                     render_mode="rgb_array")
    env = gym.wrappers.AddRenderObservation(inner, render_only=False, render_key="camera")
    with RecordingWrapper(env, tmp_path / "rec") as rec:
        rec.reset(seed=0)
        for t in range(5):
            rec.step(0)
    out = tmp_path / "cam.gif"
    assert cli.main(["video", str(tmp_path / "rec"), "-o", str(out), "--key", "camera"]) == 0
    assert "from observations/camera" in capsys.readouterr().out
    assert iio.imread(out, index=None).shape[:3] == (6, 8, 12)
    assert cli.main(["video", str(tmp_path / "rec"), "-o", str(out), "--key", "nope"]) == 1
    assert "no uint8 H x W x 3 observation leaf 'nope'" in error_lines(capsys)[0]


def test_video_by_replaying_renders_the_recorded_frames(images, tmp_path, capsys):
    pytest.importorskip("imageio_ffmpeg")
    import imageio.v2 as iio2

    from gym_recorder.replay.run import replay_frames

    check = replay_frames(images, 1)  # Image-v0 renders exactly its observation
    with RecordingReader(images) as reader:
        np.testing.assert_array_equal(np.stack(check.frames), reader[1].observations)
    assert check.status == "match" and check.render_fps == 30
    out = tmp_path / "replayed.mp4"
    assert cli.main(["video", str(images), "-o", str(out), "-e", "1", "--source", "render"]) == 0
    assert capsys.readouterr().out == f"wrote {out}: 10 frames of episode 1 from replay with " \
                                      f"render_mode='rgb_array', 30 fps\n"
    with iio2.get_reader(out) as reader:
        assert reader.count_frames() == 10


def test_video_by_replaying_cartpole(cartpole, tmp_path, capsys):
    pytest.importorskip("imageio_ffmpeg")
    pytest.importorskip("pygame",
                        reason="CartPole renders with pygame (gymnasium[classic-control])")
    import imageio.v2 as iio2

    with RecordingReader(cartpole) as reader:
        n = reader[2].length
    out = tmp_path / "cp.mp4"
    assert cli.main(["video", str(cartpole), "-o", str(out), "--episode", "2"]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"wrote {out}: {n + 1} frames of episode 2 from replay with " \
                           f"render_mode='rgb_array', 50 fps\n"
    with iio2.get_reader(out) as reader:
        assert reader.count_frames() == n + 1
        assert reader.get_data(0).shape == (400, 600, 3)


# -- export ------------------------------------------------------------------------------------

def test_export_npz_documented_layout(tmp_path, capsys):
    d = tmp_path / "nested"
    record(d, "sample_envs/NestedDict-v0", "--steps", "40")
    out = tmp_path / "out.npz"
    assert cli.main(["export", str(d), "--format", "npz", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    with RecordingReader(d) as reader:
        episodes = list(reader)
    e = len(episodes)
    assert printed.startswith(f"wrote {out}: {e} episodes, 40 steps\n")
    with np.load(out) as z:
        data = {k: z[k] for k in z.files}
    assert set(data) == {
        "observations/count", "observations/flags", "observations/grid", "observations/md",
        "observations/nested/a", "observations/nested/pair/0", "observations/nested/pair/1",
        "observations/position", "actions/choice", "actions/move", "rewards", "terminations",
        "truncations", "episode_starts", "episode_lengths", "observation_starts",
        "episode_seeds", "episode_sub_envs"}
    starts, lengths = data["episode_starts"], data["episode_lengths"]
    assert lengths.tolist() == [ep.length for ep in episodes]
    assert (data["observation_starts"] == starts + np.arange(e)).all()
    assert data["observations/position"].shape == (40 + e, 3)
    assert data["rewards"].shape == (40,) and data["rewards"].dtype == np.float64
    assert data["episode_seeds"].tolist() == [0] + [-1] * (e - 1)
    for i, ep in enumerate(episodes):
        s, o, n = starts[i], data["observation_starts"][i], lengths[i]
        np.testing.assert_array_equal(data["observations/nested/pair/1"][o:o + n + 1],
                                      ep.observations["nested"]["pair"][1])
        assert data["observations/nested/pair/1"].dtype == np.int16
        np.testing.assert_array_equal(data["observations/grid"][o:o + n + 1],
                                      ep.observations["grid"])
        np.testing.assert_array_equal(data["actions/move"][s:s + n], ep.actions["move"])
        np.testing.assert_array_equal(data["rewards"][s:s + n], ep.rewards)
        np.testing.assert_array_equal(data["terminations"][s:s + n], ep.terminations)
        np.testing.assert_array_equal(data["truncations"][s:s + n], ep.truncations)


def test_export_text_observations(tmp_path, capsys):
    d = tmp_path / "text"
    record(d, "sample_envs/Text-v0", "--episodes", "2")
    out = tmp_path / "t.npz"
    assert cli.main(["export", str(d), "-o", str(out), "--compress", "-q"]) == 0
    with RecordingReader(d) as reader, np.load(out) as z:
        assert z["observations"].tolist() == [s for ep in reader for s in ep.observations]


# -- verify, repair ----------------------------------------------------------------------------

def test_verify_and_repair(cartpole, capsys):
    pytest.importorskip("gym_recorder.integrity", reason="gym_recorder.integrity not written yet")
    assert cli.main(["verify", str(cartpole)]) == 0
    assert capsys.readouterr().out == f"{cartpole}: no problems found\n"
    assert cli.main(["repair", str(cartpole)]) == 0
    assert capsys.readouterr().out == f"{cartpole}: nothing to repair\n"
    (bin_path,) = cartpole.glob("*.bin")
    data = bytearray(bin_path.read_bytes())
    data[-1] ^= 0xFF  # flip the last byte of the last array
    bin_path.write_bytes(bytes(data))
    assert cli.main(["verify", str(cartpole)]) == 1
    captured = capsys.readouterr()
    problems = captured.out.splitlines()
    assert problems and all(line.startswith(str(cartpole)) and ": " in line for line in problems)
    assert any(bin_path.name in line or "CRC" in line or "checksum" in line for line in problems)
    assert captured.err.splitlines() == [
        f"gym-recorder verify: error: {len(problems)} problem"
        f"{'s' if len(problems) != 1 else ''} found in {cartpole}"]
    assert cli.main(["repair", str(cartpole)]) == 0
    actions = capsys.readouterr().out.splitlines()
    assert actions and actions != [f"{cartpole}: nothing to repair"]
    assert cli.main(["verify", str(cartpole), "-q"]) == 0


def test_first_difference_names_where_values_differ():
    from gym_recorder.replay.compare import first_difference

    recorded = {"position": np.array([0.5, np.nan], np.float32), "pair": (np.int64(2), "ab")}
    assert first_difference(recorded, {"position": np.array([0.5, np.nan], np.float32),
                                       "pair": (2, "ab")}, "observation") is None
    assert first_difference(recorded, {"position": np.array([0.5, 1.0], np.float32),
                                       "pair": (2, "ab")}, "observation") == \
        "observation['position']: 1 of 2 elements differ"
    assert first_difference(recorded, {"position": recorded["position"], "pair": (3, "ab")},
                            "observation") == "observation['pair'][0]: 3, recorded 2"
    assert first_difference(recorded, {"position": recorded["position"]}, "observation") == \
        "observation: keys differ"
    assert first_difference(np.zeros((2, 2)), np.zeros(4), "o") == "o: shape (4,), recorded (2, 2)"


def test_readme_export_example_indexes_episodes(cartpole, tmp_path, monkeypatch):
    from docpages import python_block

    block = python_block('np.load("cartpole.npz")')  # (docs/cli.md, export)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["export", str(cartpole), "--format", "npz", "-o", "cartpole.npz", "-q"]) == 0
    with RecordingReader(cartpole) as reader:
        for ep in reader:
            scope = {"np": np, "i": ep.index}
            exec(compile(block, "docs/cli.md (export)", "exec"), scope)
            np.testing.assert_array_equal(scope["obs"], ep.observations)
            np.testing.assert_array_equal(scope["act"], ep.actions)
            scope["d"].close()


def test_info_names_a_space_it_cannot_rebuild(tmp_path, capsys):
    """A Dict observation holding an unknown space (minigrid's mission) was shown as "-" by info
    (and null in --json): it names the Dict, the key and the class."""
    from gym_recorder import RecordingWrapper

    class Env(gym.Env):
        observation_space = gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (2, 2, 3),
                                                                    np.uint8),
                                             "mission": MissionLike()})
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return {"image": np.zeros((2, 2, 3), np.uint8), "mission": "go"}, {}

        def step(self, action):
            return {"image": np.ones((2, 2, 3), np.uint8), "mission": "go"}, 0.0, True, False, {}

    with RecordingWrapper(Env(), tmp_path) as rec:
        rec.reset(seed=0)
        rec.step(0)
    assert cli.main(["info", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    expect = "Dict holding conftest.MissionLike at ['mission'] (a space gym_recorder does not know"
    assert out["observation_space"].startswith(expect), out["observation_space"]
    assert out["envs"][0]["observation_space"].startswith(expect)
    assert out["action_space"] == "Discrete(2)"
