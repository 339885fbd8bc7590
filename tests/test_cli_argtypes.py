"""The command line's option types (gym_recorder.cli.argtypes): a bad value is a usage error
(status 2) that names the option and what is wrong, before anything runs; good values arrive
parsed."""

from __future__ import annotations

import pytest

from gym_recorder.cli import build_parser, main


@pytest.mark.parametrize("argv, message", [
    (["record", "CartPole-v1", "--episodes", "0"], "argument --episodes/-n: must be at least 1, got 0"),
    (["record", "CartPole-v1", "--episodes", "x"], "argument --episodes/-n: 'x' is not an integer"),
    (["record", "CartPole-v1", "--meta", "novalue"], "argument --meta: 'novalue' is not KEY=VALUE"),
    (["record", "CartPole-v1", "--env-kwargs", "[1]"], "argument --env-kwargs: must be a JSON object"),
    (["record", "CartPole-v1", "--env-kwargs", "{"], "argument --env-kwargs: not valid JSON"),
    (["plot", "rec", "-o", "a.png", "--size", "10x0"], "argument --size: '10x0': width and height"),
    (["plot", "rec", "-o", "a.png", "--size", "big"], "argument --size: 'big' is not WIDTHxHEIGHT"),
    (["info", "rec", "--limit", "-1"], "argument --limit: must be at least 0, got -1"),
])
def test_a_bad_value_is_a_usage_error_naming_the_option(argv, message, capsys, tmp_path,
                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # (nothing ran: no recording was started)


def test_good_values_arrive_parsed():
    args = build_parser().parse_args(
        ["record", "CartPole-v1", "-d", "rec", "--episodes", "3", "--meta", "author=me=you", "--meta",
         "note=", "--env-kwargs", '{"sutton_barto_reward": true}', "--wrapper",
         "TimeAwareObservation", "--wrapper", "ClipReward:min_reward=-1,max_reward=1"])
    assert args.episodes == 3
    assert args.meta == [("author", "me=you"), ("note", "")]
    assert args.env_kwargs == {"sutton_barto_reward": True}
    assert args.wrappers == [("TimeAwareObservation", {}),
                             ("ClipReward", {"min_reward": -1, "max_reward": 1})]
    assert build_parser().parse_args(["plot", "rec", "-o", "a.png", "--size", "640X480"]).size \
        == (640, 480)
