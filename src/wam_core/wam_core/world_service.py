"""World-expert serving logic: validate a frame, encode it once, cache it."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Dict

from .image import ImageError, fingerprint, frame_to_array
from .latency import StageTimer
from .repr_cache import CacheEntry


@dataclass
class EncodeOutcome:
    entry: CacheEntry
    cache_hit: bool
    encode_ms: float


class FrameEncoder:
    """Camera frame -> cached representation. A repeated identical frame is a hit."""

    def __init__(self, expert, cache, timeout_ms: float = 40.0):
        self.expert = expert
        self.cache = cache
        self.timeout_ms = timeout_ms
        self.frames = 0              # valid frames seen
        self.hits = 0                # identical frames served from the cache
        self.timeouts = 0            # encodes slower than the world timeout
        self.rejected: Dict[str, int] = {}
        self.timer = StageTimer('validate', 'encode', 'cache_write')

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1

    @property
    def world_calls(self) -> int:
        return self.expert.calls

    def process(self, encoding: str, height: int, width: int, step: int, data, stamp_ns: int) -> EncodeOutcome:
        """Raise ImageError (counted) for a bad frame; otherwise return the cache entry."""
        t0 = time.perf_counter()
        try:
            rgb = frame_to_array(encoding, height, width, step, data)
        except ImageError as exc:
            self.reject(_reason_key(exc))
            raise
        fp = fingerprint(encoding, height, width, data)
        t1 = time.perf_counter()
        self.timer.add('validate', (t1 - t0) * 1e3)
        entry = self.cache.lookup(fp)
        if entry is not None:
            entry = self.cache.touch(entry, stamp_ns)
            self.frames += 1
            self.hits += 1
            return EncodeOutcome(entry, True, 0.0)
        rep = self.expert.encode(rgb)
        t2 = time.perf_counter()
        encode_ms = (t2 - t1) * 1e3
        self.timer.add('encode', encode_ms)
        if encode_ms > self.timeout_ms:
            self.timeouts += 1
        entry = self.cache.put(fp, stamp_ns, rep)
        self.frames += 1          # counted once cached, so calls/frame is exact at any instant
        self.timer.add('cache_write', (time.perf_counter() - t2) * 1e3)
        return EncodeOutcome(entry, False, encode_ms)

    def calls_per_frame(self) -> float:
        """World-expert calls per *distinct* frame (1.00 means encode-once holds)."""
        distinct = self.frames - self.hits
        return self.world_calls / distinct if distinct else float('nan')


def _reason_key(exc: Exception) -> str:
    """A short counter key for an image rejection ('encoding', 'size', 'length', ...)."""
    msg = str(exc)
    for key, marker in (('encoding', 'encoding'), ('empty', 'empty'), ('length', 'data length'),
                        ('step', 'step'), ('size', 'size')):
        if marker in msg:
            return key
    return 'other'
