"""π0 (transformers' ``PI0ForConditionalGeneration``) served as a world expert and an
action expert, split where π0's own ``sample_actions`` splits it.

- the **world expert** (type ``pi0``, :mod:`.world`) runs the PaliGemma VLM once per
  observation over the robot's camera views and the active subtask's text (the prompt)
  and writes the VLM's prefix key/value cache as the representation;
- the **action expert** (type ``pi0``, :mod:`.action`) runs the flow-matching action
  expert (a Gemma "DiT") every decode against that cached prefix, which it never writes:
  its denoising steps attend to a read-only prefix (:mod:`.prefix`);
- a π0 model directory is the checkpoint in transformers' format (config.json,
  model.safetensors), its processor's files (tokenizer, image processing, the dataset's
  normalisation statistics) and a manifest whose ``pi0`` block says how the robot maps
  onto the model (cameras onto image slots, joints onto state and action dimensions,
  units, absolute or delta, control period: :mod:`.serving`), checked against the
  robot's URDF at load;
- ``python -m wam_core.models.pi0`` writes a seeded directory that loads offline
  (:mod:`.write`), or seals a downloaded one.

May import torch, transformers, numpy and ``wam_core.models``/``wam_core.common``.
"""
