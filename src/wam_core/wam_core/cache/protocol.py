"""The representation cache's contract: keys, entries, read results and refusal reasons.

One writer (the world expert) puts each encoded observation into a ring of slots
under the key ``{obs_fingerprint}:{model_version}``; many readers (action experts)
read it. A reader uses an entry only if (1) its model version equals the reader's,
(2) its observation is younger than the TTL (``freshness``) and (3) its slot was not rewritten
while it was read (a seqlock: the writer makes the sequence odd while writing, even
when done). Every backend (``inprocess``, ``shm``; ``cuda_ipc`` on a GPU) implements
``CacheWriter`` and ``CacheReader`` and refuses reads with the same reasons.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..common.clock import wall_ns

# Reasons a read is refused; they are also the keys of the reader's counters.
MISS, VERSION, STALE, TORN, UNKNOWN_SLOT, KEY_MISMATCH, NO_SEGMENT = (
    'miss',
    'version_mismatch',
    'stale',
    'torn',
    'unknown_slot',
    'key_mismatch',
    'no_segment',
)


class CacheError(RuntimeError):
    """A backend cannot be opened or used as asked (a live owner, a bad layout, a wrong shape)."""


# Representation dtypes a cache holds, as numpy stores their bytes: numpy has no
# bfloat16, so a bfloat16 representation travels as its 16-bit words and a reader views
# them as torch.bfloat16 again (``CacheEntry.dtype`` keeps the real name).
STORAGE_DTYPES = {'float32': np.float32, 'float16': np.float16, 'bfloat16': np.uint16}


def storage_dtype(name: str) -> np.dtype:
    """The numpy dtype a representation of dtype ``name`` is stored as (CacheError if none)."""
    try:
        return np.dtype(STORAGE_DTYPES[name])
    except KeyError:
        raise CacheError(
            f'representation dtype {name!r} is not one of {", ".join(STORAGE_DTYPES)}'
        ) from None


def entry_refusal(
    version: str,
    key: str,
    stamp_ns: int,
    reader_version: str,
    wanted_key: str | None,
    now: int,
    ttl_ns: int,
) -> str:
    """Why a reader may not use an entry ('' if it may), one rule for every backend, in one
    order: another model version, then another key than the descriptor named, then an
    observation older than the TTL, or stamped further in the future than the TTL (the
    wall clock stepped back: what was observed before the step cannot be dated against
    it). (Whether the slot was rewritten while read is the backend's own seqlock check,
    on top.)"""
    if version != reader_version:
        return VERSION
    if wanted_key is not None and key != wanted_key:
        return KEY_MISMATCH
    if abs(now - stamp_ns) > ttl_ns:
        return STALE
    return ''


def now_ns() -> int:
    """The cache clock: wall time, the same clock as ROS message stamps."""
    return wall_ns()


def make_key(fingerprint: str, version: str) -> str:
    return f'{fingerprint}:{version}'


@dataclass(frozen=True)
class CacheEntry:
    """What the writer tells readers (through the descriptor) about one entry."""

    key: str
    fingerprint: str
    version: str
    slot: int
    sequence: int
    stamp_ns: int
    shape: tuple[int, ...]
    dtype: str
    epoch: int = 0
    checksum: int = 0  # CRC-32 of the bytes, where the bytes travel (mooncake)


@dataclass
class ReadResult:
    ok: bool
    reason: str = ''
    array: np.ndarray | None = None
    entry: CacheEntry | None = None
    age_ms: float = float('nan')
    _check: Callable[[], bool] | None = None

    def still_valid(self) -> bool:
        """True if the slot was not rewritten since the read (re-check after zero-copy use)."""
        return self.ok and (self._check is None or self._check())


class ReadCounters:
    """A reader's hits and refusals by reason."""

    def __init__(self):
        self.hits = 0
        self.refused: dict[str, int] = {}

    def refuse(self, reason: str) -> ReadResult:
        self.refused[reason] = self.refused.get(reason, 0) + 1
        return ReadResult(False, reason)


class CacheWriter(Protocol):
    """The world expert's side of a backend."""

    backend: str
    segment: str
    epoch: int
    version: str

    def set_model_version(self, version: str) -> None: ...
    def lookup(self, fingerprint: str) -> CacheEntry | None: ...
    def put(
        self, fingerprint: str, stamp_ns: int, array: np.ndarray, dtype: str | None = None
    ) -> CacheEntry: ...
    def touch(self, entry: CacheEntry, stamp_ns: int) -> CacheEntry: ...
    def close(self) -> None: ...


class CacheReader(Protocol):
    """The action expert's side of a backend."""

    backend: str
    stats: ReadCounters

    @property
    def capacity(self) -> int: ...

    def read(
        self,
        slot: int,
        version: str,
        key: str | None = None,
        epoch: int | None = None,
        copy_into: np.ndarray | None = None,
    ) -> ReadResult: ...

    def latest(self, version: str, copy_into: np.ndarray | None = None) -> ReadResult: ...
    def set_ttl_ms(self, ttl_ms: float) -> None: ...
    def close(self) -> None: ...
