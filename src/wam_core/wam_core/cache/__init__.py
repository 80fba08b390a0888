"""The representation cache: one writer (a world expert), many readers (action experts).

``protocol`` is the contract every backend keeps (key ``{fingerprint}:{version}``,
version and TTL checks, seqlock, refusal reasons); ``inprocess``, ``shm`` and
``mooncake`` are the backends that run here (``cuda_ipc`` needs a GPU); ``factory`` opens
the configured one. May import numpy, the standard library and ``wam_core.common`` (no
torch but in ``cuda_ipc``, no ROS).
"""
