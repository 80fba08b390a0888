"""The shipped experts and how a model directory is trusted.

``world_expert`` (a transformers ViT: frame -> representation), ``action_expert``
(representation -> scene state once, then joint state + subtask -> chunk per tick),
``manifest`` (sha256 of every file, checked before anything loads), ``precision``
(dtype selection) and ``default_models`` (seeded untrained weights). May import torch,
transformers, numpy and ``wam_core.common``.
"""
