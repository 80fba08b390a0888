"""Open the configured backend: the world expert's writer, an action expert's reader."""

from __future__ import annotations

from .freshness import initial_ttl_ms
from .inprocess import InProcessCache
from .protocol import CacheError, CacheReader, CacheWriter
from .shm import ShmRingReader, ShmRingWriter


def segment_name(shm_name: str, robot: str = '') -> str:
    """One robot's ring: a fleet's robots never share one, so a reader cannot pick up
    another robot's representation ('wam_repr' for a lone robot, 'wam_repr_robot1')."""
    return f'{shm_name}_{robot.replace("/", "_")}' if robot else shm_name


def ring_slots(capacity: int, max_slots: int = 0) -> int:
    """Slots of a ring: the configured capacity, or fewer where the model says so (a
    representation of megabytes: 512 slots of a 15 MB VLM prefix would be 7.5 GB, and a
    tick only ever wants the newest few)."""
    return min(capacity, max_slots) if max_slots > 0 else capacity


def open_cache_writer(
    cfg,
    version: str,
    slot_shape,
    logger=print,
    robot: str = '',
    dtype: str = 'float32',
    max_slots: int = 0,
) -> CacheWriter:
    """The world expert's cache for one robot ('inprocess' needs no segment): slots of
    ``slot_shape`` and ``dtype`` (the world expert's spec), at most ``max_slots`` of them."""
    capacity = ring_slots(cfg.capacity, max_slots)
    if cfg.backend == 'inprocess':
        return InProcessCache(capacity, initial_ttl_ms(cfg.ttl_ms), version)
    if cfg.backend == 'shm':
        return ShmRingWriter(
            segment_name(cfg.shm_name, robot), capacity, slot_shape, version, dtype, logger
        )
    if cfg.backend == 'cuda_ipc':
        from .cuda_ipc import CudaIpcRingWriter

        return CudaIpcRingWriter(
            segment_name(cfg.shm_name, robot),
            capacity,
            slot_shape,
            version,
            dtype,
            logger=logger,
            device=cfg.cuda_device,
        )
    if cfg.backend == 'mooncake':
        from .mooncake import MooncakeWriter

        # objects kept in the store per robot (the older ones are removed): a tick only
        # ever wants the newest, and the world host lends the store a bounded segment
        return MooncakeWriter(
            cfg.mooncake, version, slot_shape, robot, min(capacity, cfg.mooncake.objects_per_robot)
        )
    raise CacheError(f'unknown representation-cache backend {cfg.backend!r}')


def open_cache_reader(cfg, robot: str = '') -> CacheReader:
    """An action expert's view of another process's cache (in-process readers share the writer)."""
    if cfg.backend == 'shm':
        return ShmRingReader(segment_name(cfg.shm_name, robot), initial_ttl_ms(cfg.ttl_ms))
    if cfg.backend == 'cuda_ipc':
        from .cuda_ipc import CudaIpcRingReader

        return CudaIpcRingReader(
            segment_name(cfg.shm_name, robot), initial_ttl_ms(cfg.ttl_ms), device=cfg.cuda_device
        )
    if cfg.backend == 'mooncake':
        from .mooncake import MooncakeReader

        return MooncakeReader(cfg.mooncake, initial_ttl_ms(cfg.ttl_ms), robot)
    raise CacheError(
        f'backend {cfg.backend!r} has no stand-alone reader; in-process readers share the writer'
    )
