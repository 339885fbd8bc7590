"""Training: a recording as what learners want (selections, transitions, samples, datasets).

``selection`` (choosing episodes and splits), ``transitions`` (flat transition arrays),
``sampling`` (episodes and windows), ``datasets`` (map-style datasets for PyTorch and friends;
``itemcache``: what each process keeps of the batches and episodes it read);
``agents``: one agent's transitions in a multi-agent recording (``transitions(agent=...)``).
"""
