"""The shipped experts and how a model directory is trusted.

``world_expert`` (a transformers ViT: frame -> representation), ``action_expert``
(representation -> scene state once, then joint state + subtask -> chunk per tick),
``manifest`` (sha256 of every file, checked before anything loads), ``precision``
(dtype selection), ``default_models`` (seeded untrained weights), ``pi0`` (π0 served as a
world and an action expert), ``contract``/``registry``/``check`` (what any expert must
provide, how a type is found, the conformance kit). May import torch, transformers,
numpy, ``wam_core.common``, ``wam_core.control`` and ``wam_core.cache.protocol`` (how a
representation is stored).
"""
