"""Open the configured backend: the world expert's writer, an action expert's reader."""

from __future__ import annotations

from .inprocess import InProcessCache
from .protocol import CacheError, CacheReader, CacheWriter
from .shm import ShmRingReader, ShmRingWriter


def open_cache_writer(cfg, version: str, slot_shape, logger=print) -> CacheWriter:
    """The world expert's cache for a ``ReprCacheConfig`` ('inprocess' needs no segment)."""
    if cfg.backend == 'inprocess':
        return InProcessCache(cfg.capacity, cfg.ttl_ms, version)
    if cfg.backend == 'shm':
        return ShmRingWriter(cfg.shm_name, cfg.capacity, slot_shape, version, logger=logger)
    raise CacheError(
        f'backend {cfg.backend!r} is not available on this machine (cuda_ipc needs a GPU)'
    )


def open_cache_reader(cfg) -> CacheReader:
    """An action expert's view of another process's cache (in-process readers share the writer)."""
    if cfg.backend == 'shm':
        return ShmRingReader(cfg.shm_name, cfg.ttl_ms)
    raise CacheError(
        f'backend {cfg.backend!r} has no stand-alone reader; in-process readers share the writer'
    )
