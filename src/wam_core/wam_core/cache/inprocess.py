"""In-process backend: writer and readers share one object, and nothing is copied.

The reader gets the very array the writer stored; arrays are made read-only at
``put`` and never mutated after it. Used when every node runs in one process.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .protocol import (
    MISS,
    UNKNOWN_SLOT,
    CacheEntry,
    CacheError,
    ReadCounters,
    ReadResult,
    entry_refusal,
    make_key,
    now_ns,
)


class InProcessCache:
    """Ring of (entry, array) in one process. Writer and readers share the object."""

    backend = 'inprocess'

    def __init__(
        self, capacity: int, ttl_ms: float, version: str, clock: Callable[[], int] = now_ns
    ):
        if capacity < 1:
            raise CacheError('capacity must be >= 1')
        self.capacity = capacity
        self.ttl_ns = int(ttl_ms * 1e6)
        self.clock = clock
        self.segment = ''
        self.epoch = 0
        self._slots: list = [None] * capacity  # (CacheEntry, array)
        self._seq = [0] * capacity
        self._index: dict[str, int] = {}
        self._next = 0
        self._latest = -1
        self.version = version
        self.stats = ReadCounters()

    def set_ttl_ms(self, ttl_ms: float) -> None:
        """The freshness bound from now on (an auto TTL a descriptor announced)."""
        self.ttl_ns = int(ttl_ms * 1e6)

    # writer side
    def set_model_version(self, version: str) -> None:
        if version != self.version:
            self.version = version
            self.clear()

    def set_capacity(self, capacity: int) -> None:
        """Fewer (or more) slots, for a model whose representations are large; empties
        the ring (called at configure, before anything is served)."""
        if capacity < 1:
            raise CacheError('capacity must be >= 1')
        if capacity != self.capacity:
            self.clear()
            self.capacity = capacity
            self._slots = [None] * capacity
            # sequences keep counting up: a read taken before can never look valid again
            self._seq = [max(self._seq) + 2] * capacity
            self._next = 0

    def clear(self) -> None:
        for i in range(self.capacity):
            if self._slots[i] is not None:
                self._seq[i] += 2
            self._slots[i] = None
        self._index.clear()
        self._latest = -1

    def lookup(self, fingerprint: str) -> CacheEntry | None:
        slot = self._index.get(make_key(fingerprint, self.version))
        return None if slot is None else self._slots[slot][0]

    def put(
        self, fingerprint: str, stamp_ns: int, array: np.ndarray, dtype: str | None = None
    ) -> CacheEntry:
        """``dtype``: the representation's dtype when its array stores it as other words
        (bfloat16 as uint16, ``protocol.storage_dtype``); default: the array's own."""
        slot = self._next
        self._next = (slot + 1) % self.capacity
        old = self._slots[slot]
        if old is not None:
            self._index.pop(old[0].key, None)
        self._seq[slot] += 2
        key = make_key(fingerprint, self.version)
        entry = CacheEntry(
            key,
            fingerprint,
            self.version,
            slot,
            self._seq[slot],
            int(stamp_ns),
            tuple(array.shape),
            dtype or str(array.dtype),
        )
        array.setflags(write=False)  # readers share it: nobody may mutate it
        self._slots[slot] = (entry, array)
        self._index[key] = slot
        self._latest = slot
        return entry

    def touch(self, entry: CacheEntry, stamp_ns: int) -> CacheEntry:
        """A repeated identical frame: refresh the observation stamp, no re-encode."""
        cur = self._slots[entry.slot]
        if cur is None or cur[0].key != entry.key:
            raise CacheError(f'entry {entry.key} is no longer in slot {entry.slot}')
        self._seq[entry.slot] += 2
        new = CacheEntry(
            entry.key,
            entry.fingerprint,
            entry.version,
            entry.slot,
            self._seq[entry.slot],
            int(stamp_ns),
            entry.shape,
            entry.dtype,
        )
        self._slots[entry.slot] = (new, cur[1])
        self._latest = entry.slot
        return new

    # reader side
    def read(
        self,
        slot: int,
        version: str,
        key: str | None = None,
        epoch: int | None = None,
        copy_into: np.ndarray | None = None,
    ) -> ReadResult:
        if not 0 <= slot < self.capacity:
            return self.stats.refuse(UNKNOWN_SLOT)
        cur = self._slots[slot]
        if cur is None:
            return self.stats.refuse(MISS)
        entry, array = cur
        now = self.clock()
        why = entry_refusal(
            entry.version, entry.key, entry.stamp_ns, version, key, now, self.ttl_ns
        )
        if why:
            return self.stats.refuse(why)
        age = now - entry.stamp_ns
        seq = self._seq[slot]
        if copy_into is not None:
            copy_into[...] = array
            array = copy_into
        self.stats.hits += 1
        return ReadResult(True, '', array, entry, age / 1e6, lambda: self._seq[slot] == seq)

    def latest(self, version: str, copy_into: np.ndarray | None = None) -> ReadResult:
        if self._latest < 0:
            return self.stats.refuse(MISS)
        return self.read(self._latest, version, copy_into=copy_into)

    def close(self) -> None:
        self.clear()
