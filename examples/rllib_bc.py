"""Behaviour cloning with RLlib from a gym_recorder recording (and recording inside EnvRunners).

RLlib pins its own Gymnasium and needs torch, so run this in its own environment::

    python -m venv /tmp/rllib && /tmp/rllib/bin/pip install "ray[rllib]" torch==2.13.0 atomicwrites
    PYTHONPATH=. /tmp/rllib/bin/python examples/rllib_bc.py --iterations 10 --updates 20

What it does:

1. Records demonstrations of CartPole-v1 by a simple expert (push the cart towards where the
   pole falls) with ``record_parallel``: Ray actors, one writer each, into one directory.
2. Turns the recording into RLlib's offline columns with ``to_rllib(read_recording(...))`` and
   writes them as Parquet, RLlib's default offline input.
3. Trains BC on it, evaluating every iteration in CartPole-v1. The evaluation EnvRunners record
   their episodes with ``RecordingWrapper`` (the recipe: ``register_env`` with a creator that
   wraps each sub-env; the writer id is left to the wrapper, unique per process and wrapper,
   never derived from ``env_context.vector_index``, which RLlib gives as 0 to every sub-env).
4. Prints the expert's return, each iteration's BC loss and evaluation return, and what the
   EnvRunners recorded.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np


def expert(obs: np.ndarray) -> int:
    """A hand-written CartPole controller: about 500 (the time limit) most episodes."""
    x, x_dot, theta, theta_dot = (float(v) for v in obs)
    return int(theta + 0.5 * theta_dot + 0.01 * x + 0.1 * x_dot > 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes-per-worker", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--updates", type=int, default=20,
                        help="BC updates (batches of 1024 steps) per iteration")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()

    import gymnasium as gym
    import ray
    from ray.rllib.algorithms.bc import BCConfig
    from ray.tune.registry import register_env

    from gym_recorder import RecordingReader, RecordingWrapper
    from gym_recorder.integrations.ray import read_recording, record_parallel, to_rllib

    work = args.workdir or tempfile.mkdtemp(prefix="rllib_bc_")
    demos = os.path.join(work, "demos")
    parquet = os.path.join(work, "demos_parquet")
    evals = os.path.join(work, "eval_recording")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # 4 logical CPUs (on 2 cores): the evaluation EnvRunner, the OfflinePreLearner actor and
    # the read tasks each hold one, and with 2 the read tasks would wait forever.
    ray.init(num_cpus=4, include_dashboard=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(
                 [here, os.environ.get("PYTHONPATH", "")])}})

    summary = record_parallel("CartPole-v1", demos, num_workers=2,
                              episodes_per_worker=args.episodes_per_worker, seed=0, policy=expert)
    with RecordingReader(demos) as reader:
        returns = [s.total_reward for s in reader.summaries()]
    print(f"demonstrations: {summary.episodes} episodes, {summary.steps} steps by "
          f"{len(summary.writers)} writers (seeds {summary.seeds}); expert return mean "
          f"{np.mean(returns):.1f}, min {min(returns):.0f}")
    to_rllib(read_recording(demos)).write_parquet(parquet)

    def recorded_cartpole(env_context):  # one RecordingWrapper per sub-env, its own writer
        return RecordingWrapper(gym.make("CartPole-v1"), evals, flush_interval=1.0)

    register_env("RecordedCartPole", recorded_cartpole)
    config = (
        BCConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .offline_data(input_=[parquet], dataset_num_iters_per_learner=args.updates,
                      map_batches_kwargs={"concurrency": 1, "num_cpus": 1},
                      iter_batches_kwargs={"prefetch_batches": 1})
        .training(lr=0.0008, train_batch_size_per_learner=1024)
        .evaluation(evaluation_interval=1, evaluation_num_env_runners=1,
                    evaluation_duration=5, evaluation_duration_unit="episodes",
                    evaluation_config={"env": "RecordedCartPole"})
    )
    algo = config.build()
    try:
        for i in range(args.iterations):
            result = algo.train()
            learner = result.get("learners", {}).get("default_policy", {})
            loss = learner.get("policy_loss", learner.get("total_loss", float("nan")))
            ev = result.get("evaluation", {}).get("env_runners", {})
            ret = ev.get("episode_return_mean", float("nan"))
            print(f"iteration {i + 1}: BC loss {float(loss):.4f}, evaluation return mean "
                  f"{float(ret):.1f}")
    finally:
        algo.stop()
    with RecordingReader(evals) as reader:
        lengths = [s.length for s in reader.summaries()]
        print(f"evaluation EnvRunners recorded {len(reader)} episodes ({sum(lengths)} steps) "
              f"by {len(reader.writers)} writers into {evals}")
    ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
