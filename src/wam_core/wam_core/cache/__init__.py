"""The representation cache: one writer (a world expert), many readers (action experts).

``protocol`` is the contract every backend keeps (key ``{fingerprint}:{version}``,
version and TTL checks, seqlock, refusal reasons); ``inprocess`` and ``shm`` are the
backends that run here; ``factory`` opens the configured one. May import numpy and
the standard library only: no torch, no ROS.
"""
