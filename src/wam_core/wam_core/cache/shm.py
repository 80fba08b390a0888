"""POSIX shared-memory backend: a header plus a ring of fixed-size slots in /dev/shm.

Readers in other processes get a numpy *view* into the segment (zero-copy) and
re-check the slot's sequence after use (``ReadResult.still_valid``), or copy into
their own buffer with ``copy_into``. Segments are mode 0600, unlinked on clean exit,
and reclaimed at start when the writer that made them is dead; a reader re-attaches
when the writer restarts (a new inode or epoch).

The seqlock relies on x86-64's total store order for the ordering of the plain
8-byte stores numpy makes; on weaker memory models (ARM: an aarch64 Jetson is a likely
robot computer) a reader could see the sequence turn even before the data it guards, so
both ends refuse to open a ring there, with the reason (``store_order_problem``). Fences
from Python would need a native extension; the other backends serve such a machine.

The same segment carries the ``cuda_ipc`` ring's sequence words and slot headers: there
the header says the slot data lives in device memory (``H_DATA_LOCATION``) and holds the
CUDA IPC handle of that memory; the slot data hooks (``_init_data``, ``_write_data``,
``_data_view``) are where ``cuda_ipc`` differs, everything else is this module's.
"""

from __future__ import annotations

import mmap
import os
import platform
import secrets
import time
from collections.abc import Callable

import numpy as np

from .protocol import (
    MISS,
    NO_SEGMENT,
    STORAGE_DTYPES,
    TORN,
    UNKNOWN_SLOT,
    CacheEntry,
    CacheError,
    ReadCounters,
    ReadResult,
    entry_refusal,
    make_key,
    now_ns,
    storage_dtype,
)

SHM_DIR = '/dev/shm'
MAGIC = int.from_bytes(b'WAMREPR1', 'little')
LAYOUT_VERSION = 1
HEADER_BYTES = 4096
SLOT_HEADER_BYTES = 256
VERSION_BYTES = 128
FP_BYTES = 32
DTYPE_CODES = {'float32': 1, 'float16': 2, 'bfloat16': 3}
DTYPE_NAMES = {v: k for k, v in DTYPE_CODES.items()}
ITEMSIZE = {name: np.dtype(STORAGE_DTYPES[name]).itemsize for name in DTYPE_CODES}

# Header u64 word indices
H_MAGIC, H_LAYOUT, H_PID, H_EPOCH, H_CAPACITY, H_SLOT_BYTES, H_GENERATION, H_LATEST, H_CLOSED = (
    range(9)
)
# where the slot data lives (0: after each slot header here; 1: in device memory, see
# cuda_ipc), the CUDA device index and the length of the IPC handle at H_HANDLE_OFF
H_DATA_LOCATION, H_DEVICE, H_HANDLE_LEN = 9, 10, 11
DATA_IN_SEGMENT, DATA_ON_DEVICE = 0, 1
H_VERSION_OFF = 128  # byte offset of the model-version string
H_HANDLE_OFF, HANDLE_BYTES = 256, 256  # byte offset and room of the device memory's handle
# Slot u64 word indices (relative to the slot start)
S_SEQ, S_STAMP, S_WRITTEN, S_NDIM = 0, 1, 2, 3
S_SHAPE = 4  # 4 words
S_DTYPE, S_NBYTES, S_GENERATION = 8, 9, 10
S_FP_OFF, S_VERSION_OFF = 96, 128  # byte offsets of fingerprint and version strings


# machines whose stores are seen by other cores in program order (total store order)
TSO_MACHINES = ('x86_64', 'amd64', 'i386', 'i686')


def store_order_problem(machine: str | None = None) -> str:
    """Why this machine cannot keep the seqlock's ordering ('' if it can)."""
    m = (machine if machine is not None else platform.machine()).lower()
    if m in TSO_MACHINES:
        return ''
    return (
        f"the shm ring's seqlock relies on x86-64 total store order and this machine is "
        f'{m or "unknown"}: use repr_cache.backend inprocess (every node in one process) '
        'or mooncake'
    )


def shm_path(name: str) -> str:
    return os.path.join(SHM_DIR, name)


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _ShmLayout:
    """Views over a mapped segment; shared by writer and reader."""

    def __init__(self, mm: mmap.mmap):
        self.mm = mm
        self.hdr = np.ndarray((HEADER_BYTES // 8,), np.uint64, buffer=mm, offset=0)
        if int(self.hdr[H_MAGIC]) != MAGIC or int(self.hdr[H_LAYOUT]) != LAYOUT_VERSION:
            raise CacheError('not a representation-cache segment (bad magic or layout version)')
        self.capacity = int(self.hdr[H_CAPACITY])
        self.slot_bytes = int(self.hdr[H_SLOT_BYTES])
        self.data_location = int(self.hdr[H_DATA_LOCATION])
        if self.data_location not in (DATA_IN_SEGMENT, DATA_ON_DEVICE):
            raise CacheError(f'unknown slot data location {self.data_location}')
        in_segment = self.data_location == DATA_IN_SEGMENT
        self.stride = SLOT_HEADER_BYTES + (self.slot_bytes if in_segment else 0)
        if HEADER_BYTES + self.capacity * self.stride > len(mm):
            raise CacheError('segment is smaller than its header claims')
        self.slot_words = [
            np.ndarray(
                (SLOT_HEADER_BYTES // 8,),
                np.int64,
                buffer=mm,
                offset=HEADER_BYTES + i * self.stride,
            )
            for i in range(self.capacity)
        ]

    def slot_offset(self, slot: int) -> int:
        return HEADER_BYTES + slot * self.stride

    def read_str(self, offset: int, size: int) -> str:
        raw = self.mm[offset : offset + size]
        return raw.split(b'\0', 1)[0].decode('utf-8', 'replace')

    def handle(self) -> bytes:
        """The device memory's IPC handle (cuda_ipc segments)."""
        n = min(int(self.hdr[H_HANDLE_LEN]), HANDLE_BYTES)
        return bytes(self.mm[H_HANDLE_OFF : H_HANDLE_OFF + n])

    def data_view(self, slot: int, shape, dtype: str) -> np.ndarray:
        if self.data_location != DATA_IN_SEGMENT:
            raise CacheError('the slot data of this segment is in device memory')
        return np.ndarray(
            shape,
            storage_dtype(dtype),  # bfloat16: its 16-bit words
            buffer=self.mm,
            offset=self.slot_offset(slot) + SLOT_HEADER_BYTES,
        )


def _close_quietly(mm: mmap.mmap) -> None:
    try:
        mm.close()
    except BufferError:
        pass  # a view is still alive somewhere; the mapping goes with it


def _round_up(n: int, k: int = 64) -> int:
    return (n + k - 1) // k * k


class ShmRingWriter:
    """The single writer of a shared-memory ring. Create it before the readers."""

    backend = 'shm'
    data_location = DATA_IN_SEGMENT

    def __init__(
        self,
        name: str,
        capacity: int,
        slot_shape: tuple[int, ...],
        version: str,
        dtype: str = 'float32',
        logger: Callable[[str], None] = print,
    ):
        if dtype not in DTYPE_CODES:
            raise CacheError(f'unsupported dtype {dtype}')
        why = store_order_problem()
        if why:
            raise CacheError(why)
        self.segment = name
        self.path = shm_path(name)
        self.capacity = capacity
        self.slot_shape = tuple(slot_shape)
        self.dtype = dtype
        slot_bytes = _round_up(int(np.prod(slot_shape)) * ITEMSIZE[dtype])
        in_segment = self.data_location == DATA_IN_SEGMENT
        size = HEADER_BYTES + capacity * (SLOT_HEADER_BYTES + (slot_bytes if in_segment else 0))
        self.reclaimed = self._reclaim_stale(logger)
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.ftruncate(fd, size)
            self._mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        hdr = np.ndarray((HEADER_BYTES // 8,), np.uint64, buffer=self._mm)
        hdr[H_LAYOUT] = LAYOUT_VERSION
        hdr[H_PID] = os.getpid()
        self.epoch = secrets.randbits(63)
        hdr[H_EPOCH] = self.epoch
        hdr[H_CAPACITY] = capacity
        hdr[H_SLOT_BYTES] = slot_bytes
        hdr[H_DATA_LOCATION] = self.data_location
        try:
            self._init_data(hdr, capacity * slot_bytes)
        except BaseException:  # e.g. no device memory left: leave no segment behind
            del hdr
            _close_quietly(self._mm)
            os.unlink(self.path)
            raise
        hdr[H_MAGIC] = MAGIC  # last: readers only trust a fully initialised header
        self._l = _ShmLayout(self._mm)
        self._index: dict[str, int] = {}
        self._keys: list = [None] * capacity
        self._next = 0
        self._closed = False
        self.version = ''
        self._write_version(version)

    def _init_data(self, hdr: np.ndarray, nbytes: int) -> None:
        """Where the slot data lives: here, after each slot header (nothing to set up)."""

    def _check_array(self, array) -> None:
        if (
            array.dtype != storage_dtype(self.dtype)
            or array.nbytes > self._l.slot_bytes
            or array.ndim > 4
        ):
            raise CacheError(
                f'array {tuple(array.shape)} {array.dtype} does not fit a slot of '
                f'{self._l.slot_bytes} bytes {self.dtype}'
            )

    def _write_data(self, slot: int, array) -> None:
        """Copy the representation into the slot; complete when this returns."""
        self._l.data_view(slot, array.shape, self.dtype)[...] = array

    def _reclaim_stale(self, logger) -> bool:
        """Unlink a segment left by a crashed writer; refuse one a live writer owns."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            st = os.fstat(fd)
            pid = 0
            if st.st_size >= HEADER_BYTES:
                with mmap.mmap(fd, HEADER_BYTES, mmap.MAP_SHARED, mmap.PROT_READ) as mm:
                    hdr = np.frombuffer(mm[:HEADER_BYTES], np.uint64)
                    if int(hdr[H_MAGIC]) == MAGIC and not int(hdr[H_CLOSED]):
                        pid = int(hdr[H_PID])
        finally:
            os.close(fd)
        if pid and pid != os.getpid() and _pid_alive(pid):
            raise CacheError(
                f'shared-memory segment {self.path} is owned by live writer pid {pid}'
            )
        os.unlink(self.path)
        logger(
            f'reclaimed stale representation-cache segment {self.path} '
            f'(writer pid {pid or "?"} is gone)'
        )
        return True

    def _write_version(self, version: str) -> None:
        raw = version.encode('utf-8')
        if len(raw) >= VERSION_BYTES:
            raise CacheError(f'model version longer than {VERSION_BYTES - 1} bytes')
        self._mm[H_VERSION_OFF : H_VERSION_OFF + VERSION_BYTES] = raw.ljust(VERSION_BYTES, b'\0')
        self.version = version

    def set_model_version(self, version: str) -> None:
        if version != self.version:
            self.clear()
            self._write_version(version)

    def clear(self) -> None:
        hdr = self._l.hdr
        hdr[H_LATEST] = 0
        hdr[H_GENERATION] = int(hdr[H_GENERATION]) + 1
        for i, w in enumerate(self._l.slot_words):
            if self._keys[i] is not None:
                w[S_SEQ] += 1
                self._mm[
                    self._l.slot_offset(i) + S_VERSION_OFF : self._l.slot_offset(i)
                    + SLOT_HEADER_BYTES
                ] = b'\0' * (SLOT_HEADER_BYTES - S_VERSION_OFF)
                w[S_SEQ] += 1
            self._keys[i] = None
        self._index.clear()

    def lookup(self, fingerprint: str) -> CacheEntry | None:
        slot = self._index.get(make_key(fingerprint, self.version))
        return None if slot is None else self._entry(slot)

    def _entry(self, slot: int) -> CacheEntry:
        w = self._l.slot_words[slot]
        shape = tuple(int(x) for x in w[S_SHAPE : S_SHAPE + int(w[S_NDIM])])
        key = self._keys[slot]
        return CacheEntry(
            key,
            key.split(':', 1)[0],
            self.version,
            slot,
            int(w[S_SEQ]),
            int(w[S_STAMP]),
            shape,
            DTYPE_NAMES[int(w[S_DTYPE])],
            self.epoch,
        )

    def put(
        self, fingerprint: str, stamp_ns: int, array: np.ndarray, dtype: str | None = None
    ) -> CacheEntry:
        """``dtype``: the representation's dtype, which must be the ring's (default)."""
        if dtype is not None and dtype != self.dtype:
            raise CacheError(f'a {dtype} representation in a ring of {self.dtype} slots')
        self._check_array(array)
        if len(fingerprint) != FP_BYTES:
            raise CacheError(f'fingerprint must be {FP_BYTES} hex chars')
        slot = self._next
        self._next = (slot + 1) % self.capacity
        old = self._keys[slot]
        if old is not None:
            self._index.pop(old, None)
        w = self._l.slot_words[slot]
        off = self._l.slot_offset(slot)
        w[S_SEQ] += 1  # odd: write in progress
        w[S_STAMP] = stamp_ns
        w[S_WRITTEN] = now_ns()
        w[S_NDIM] = array.ndim
        w[S_SHAPE : S_SHAPE + 4] = list(array.shape) + [0] * (4 - array.ndim)
        w[S_DTYPE] = DTYPE_CODES[self.dtype]
        w[S_NBYTES] = self._nbytes(array)
        w[S_GENERATION] = int(self._l.hdr[H_GENERATION])
        self._mm[off + S_FP_OFF : off + S_FP_OFF + FP_BYTES] = fingerprint.encode('ascii')
        self._mm[off + S_VERSION_OFF : off + S_VERSION_OFF + VERSION_BYTES] = self.version.encode(
            'utf-8'
        ).ljust(VERSION_BYTES, b'\0')
        self._write_data(slot, array)
        w[S_SEQ] += 1  # even: complete
        key = make_key(fingerprint, self.version)
        self._keys[slot] = key
        self._index[key] = slot
        self._l.hdr[H_LATEST] = slot + 1
        return self._entry(slot)

    @staticmethod
    def _nbytes(array) -> int:
        return int(array.nbytes)

    def touch(self, entry: CacheEntry, stamp_ns: int) -> CacheEntry:
        if self._keys[entry.slot] != entry.key:
            raise CacheError(f'entry {entry.key} is no longer in slot {entry.slot}')
        w = self._l.slot_words[entry.slot]
        w[S_SEQ] += 1
        w[S_STAMP] = stamp_ns
        w[S_SEQ] += 1
        self._l.hdr[H_LATEST] = entry.slot + 1
        return self._entry(entry.slot)

    def close(self, unlink: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        self._l.hdr[H_CLOSED] = 1
        self._l = None
        try:
            self._mm.close()
        except BufferError:
            pass  # a view is still alive somewhere; the mapping goes with the process
        if unlink:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class ShmRingReader:
    """Attach read-only to a writer's ring; re-attach when the writer restarts."""

    backend = 'shm'
    data_location = DATA_IN_SEGMENT
    REATTACH_CHECK_S = 0.25

    def __init__(self, name: str, ttl_ms: float, clock: Callable[[], int] = now_ns):
        why = store_order_problem()
        if why:
            raise CacheError(why)
        self.segment = name
        self.path = shm_path(name)
        self.ttl_ns = int(ttl_ms * 1e6)
        self.clock = clock
        self.stats = ReadCounters()
        self._l: _ShmLayout | None = None
        self._ino = None
        self._next_check = 0.0
        self.epoch = 0
        self.attach_error = ''  # why the last re-attach failed (reads refuse: no_segment)
        self.attach()

    def set_ttl_ms(self, ttl_ms: float) -> None:
        """The freshness bound from now on (an auto TTL a descriptor announced)."""
        self.ttl_ns = int(ttl_ms * 1e6)

    def attach(self) -> bool:
        """(Re)map the segment. Returns False if there is no usable segment yet."""
        self._detach()
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            st = os.fstat(fd)
            if st.st_uid != os.getuid() or st.st_mode & 0o077:
                raise CacheError(
                    f'refusing segment {self.path}: owner uid {st.st_uid}, '
                    f'mode {oct(st.st_mode & 0o777)} '
                    f'(must be ours and 0600)'
                )
            if st.st_size < HEADER_BYTES:
                return False
            mm = mmap.mmap(fd, st.st_size, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        try:
            lay = _ShmLayout(mm)
        except CacheError:
            mm.close()
            return False
        if lay.data_location != self.data_location:
            on_device = lay.data_location == DATA_ON_DEVICE
            del lay  # its views pin the mapping
            _close_quietly(mm)
            raise CacheError(
                f'segment {self.path} keeps its slot data in '
                f'{"device memory" if on_device else "the segment"}: '
                f'open it with the {"cuda_ipc" if on_device else "shm"} backend'
            )
        try:
            self._attach_data(lay)
        except CacheError:
            del lay
            _close_quietly(mm)
            raise
        self._l = lay
        self._ino = st.st_ino
        self.epoch = int(lay.hdr[H_EPOCH])
        return True

    def _attach_data(self, lay: _ShmLayout) -> None:
        """Open what the slot data needs beyond the mapping (nothing for shm)."""

    def _detach_data(self) -> None:
        """Close what ``_attach_data`` opened."""

    def _data_view(self, lay: _ShmLayout, slot: int, shape, dtype: str):
        return lay.data_view(slot, shape, dtype)

    def _copy(self, view, into):
        """Copy a slot's data into the caller's buffer; complete when this returns."""
        into[...] = view
        return into

    def _detach(self):
        if self._l is not None:
            self._detach_data()
            mm = self._l.mm
            self._l = None
            try:
                mm.close()
            except BufferError:
                pass  # a caller still holds a view; it is dropped with that view
        self._ino = None

    def _maybe_reattach(self, epoch: int | None) -> None:
        t = time.monotonic()
        stale = (
            self._l is None
            or int(self._l.hdr[H_CLOSED])
            or (epoch is not None and epoch != self.epoch)
        )
        if not stale and t >= self._next_check:
            self._next_check = t + self.REATTACH_CHECK_S
            try:
                stale = os.stat(self.path).st_ino != self._ino
            except FileNotFoundError:
                stale = True
        if stale:
            try:
                self.attach()
                self.attach_error = ''
            except CacheError as exc:  # on the read path: refused as no_segment, not raised
                self.attach_error = str(exc)

    @property
    def capacity(self) -> int:
        return self._l.capacity if self._l else 0

    @property
    def writer_version(self) -> str:
        return self._l.read_str(H_VERSION_OFF, VERSION_BYTES) if self._l else ''

    def read(
        self,
        slot: int,
        version: str,
        key: str | None = None,
        epoch: int | None = None,
        copy_into: np.ndarray | None = None,
    ) -> ReadResult:
        self._maybe_reattach(epoch)
        lay = self._l
        if lay is None:
            return self.stats.refuse(NO_SEGMENT)
        if not 0 <= slot < lay.capacity:
            return self.stats.refuse(UNKNOWN_SLOT)
        w = lay.slot_words[slot]
        off = lay.slot_offset(slot)
        s1 = int(w[S_SEQ])
        if s1 == 0:
            return self.stats.refuse(MISS)
        if s1 & 1:  # writer is mid-write
            return self.stats.refuse(TORN)
        slot_version = lay.read_str(off + S_VERSION_OFF, VERSION_BYTES)
        fp = lay.read_str(off + S_FP_OFF, FP_BYTES)
        stamp = int(w[S_STAMP])
        ndim = int(w[S_NDIM])
        dtype_code = int(w[S_DTYPE])
        shape = tuple(int(x) for x in w[S_SHAPE : S_SHAPE + min(ndim, 4)])
        if not slot_version:  # cleared (a model-version change): nothing there
            return self.stats.refuse(MISS)
        now = self.clock()
        why = entry_refusal(
            slot_version, make_key(fp, slot_version), stamp, version, key, now, self.ttl_ns
        )
        if why:
            return self.stats.refuse(why)
        dtype = DTYPE_NAMES.get(dtype_code)
        if dtype is None or int(np.prod(shape)) * ITEMSIZE[dtype] > lay.slot_bytes:
            return self.stats.refuse(TORN)
        view = self._data_view(lay, slot, shape, dtype)
        if copy_into is not None:
            view = self._copy(view, copy_into)
        if int(w[S_SEQ]) != s1:  # rewritten while we read it
            return self.stats.refuse(TORN)
        age = now - stamp
        self.stats.hits += 1
        entry = CacheEntry(
            make_key(fp, slot_version), fp, slot_version, slot, s1, stamp, shape, dtype, self.epoch
        )
        return ReadResult(True, '', view, entry, age / 1e6, lambda: int(w[S_SEQ]) == s1)

    def latest(self, version: str, copy_into: np.ndarray | None = None) -> ReadResult:
        self._maybe_reattach(None)
        if self._l is None:
            return self.stats.refuse(NO_SEGMENT)
        latest = int(self._l.hdr[H_LATEST])
        if latest == 0:
            return self.stats.refuse(MISS)
        return self.read(latest - 1, version, copy_into=copy_into)

    def close(self) -> None:
        self._detach()
