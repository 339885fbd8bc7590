"""Running envs again: drive an env with a policy, replay a recording, compare exactly.

``drive`` (record a registered env driven by a policy: ``gym-recorder record``), ``run`` (make
the recorded env again and replay: ``gym-recorder replay``; with ``make``: the env and policy a
command names, ``factory``: a writer's env made again, ``episode``: one episode compared),
``vector`` (native vector envs), ``compare`` (the one rule of what "the same" means);
``drive_agents`` and ``multiagent``: the same for PettingZoo envs (``module:function`` entry
points).
"""
