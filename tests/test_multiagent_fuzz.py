"""Fuzzing multi-agent recordings: mutated ones read back (every agent's view, one agent's
transitions, the replay's checks) or raise FormatError, nothing else.

The mutations are test_fuzz's (random JSON values at random paths of the manifest and the batch
JSON, byte flips, truncations and insertions), on a tic-tac-toe (AEC) and a pursuit (Parallel)
recording; what is read goes further: ``episode.agents`` and ``transitions(reader, agent=...)``.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pettingzoo")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from test_fuzz import (FUZZ, _batch_files, _copy, _fix_integrity, _manifest,  # noqa: E402
                       mutate_bytes, mutate_json)

from gym_recorder import FormatError, RecordingReader  # noqa: E402
from gym_recorder.errors import UnsupportedSpaceError  # noqa: E402
from gym_recorder.training.transitions import transitions  # noqa: E402

# Fewer examples than test_fuzz's: the reading is the same, only the multi-agent views are new.
MA_FUZZ = settings(FUZZ, max_examples=100)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    from pettingzoo.classic import tictactoe_v3
    from pettingzoo.sisl import pursuit_v5
    from gym_recorder.record.multiagent import RecordingAECWrapper, RecordingParallelWrapper

    root = tmp_path_factory.mktemp("ma_fuzz")
    aec = RecordingAECWrapper(tictactoe_v3.env(), root / "aec", target_batch_bytes=3000)
    for game in range(3):
        aec.reset(seed=game)
        for agent in aec.agent_iter():
            obs, _, term, trunc, _ = aec.last()
            aec.step(None if term or trunc else int(obs["action_mask"].nonzero()[0][0]))
    aec.close()
    par = RecordingParallelWrapper(pursuit_v5.parallel_env(max_cycles=6, n_pursuers=2,
                                                           n_evaders=2), root / "par",
                                   target_batch_bytes=3000)
    for e in range(2):
        par.reset(seed=e)
        while par.agents:
            par.step({a: 0 for a in par.agents})
    par.close()
    return {"aec": root / "aec", "par": root / "par"}


def _read(d):
    for verify in (False, True):
        try:
            with RecordingReader(d, verify=verify) as reader:
                for ep in reader:
                    if ep.multiagent is not None:
                        for view in ep.agents.values():
                            view.rewards.tolist()
                ma = reader[0].multiagent if len(reader) else None
                if ma is not None:
                    try:
                        transitions(reader, agent=ma.agents[0])
                    except UnsupportedSpaceError:
                        pass  # (episodes no longer share one space)
        except FormatError as e:
            assert str(e)


@MA_FUZZ
@given(data=st.data(), name=st.sampled_from(["aec", "par"]))
def test_fuzz_multiagent_json(sources, tmp_path, data, name):
    d = _copy(sources[name], tmp_path)
    target = data.draw(st.sampled_from([_manifest(d)] + [
        p for p in _batch_files(d) if p.suffix == ".json"]), label="file")
    raw = json.dumps(mutate_json(data, json.loads(target.read_bytes()))).encode()
    target.write_bytes(raw)
    if target != _manifest(d):
        _fix_integrity(d, target, raw)
    _read(d)


@MA_FUZZ
@given(data=st.data(), name=st.sampled_from(["aec", "par"]))
def test_fuzz_multiagent_bytes(sources, tmp_path, data, name):
    d = _copy(sources[name], tmp_path)
    target = data.draw(st.sampled_from(_batch_files(d)), label="file")
    target.write_bytes(mutate_bytes(data, target.read_bytes()))
    _read(d)
