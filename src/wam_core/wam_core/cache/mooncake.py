"""Mooncake Store backend: representations across hosts.

The world expert's host puts each representation into the Mooncake Store (its
``mooncake_master`` keeps the object index and, with its built-in HTTP metadata
server, the transfer engine's segment metadata); the descriptor still travels over DDS.
The robot's host fetches the tensor **when the descriptor arrives**, on a fetch thread,
into a local ring (an ``InProcessCache``), and the 50 Hz tick reads only that local
ring: a slow or failed fetch shows up as a stale or missing representation (the action
expert's hold_last_action), never as a late tick.

Object names are ``wam/<robot>/{obs_fingerprint}:{model_version}``: the cache key with
the robot in front, so each robot's writer removes only its own objects when they leave
its ring (two robots seeing an identical frame would otherwise share one object). A
fetched tensor is used only if its size matches the descriptor's shape and dtype and its
CRC-32 matches the descriptor's; otherwise it is refused with the reason, counted. The
same version and TTL rules as every backend then apply at the tick's read.

Transport, device and addresses are configuration (``repr_cache.mooncake``): TCP over
loopback here; RDMA or AWS EFA (``protocol: rdma`` / ``efa``, ``device_name`` the NIC)
in production. Needs ``mooncake-transfer-engine-non-cuda`` (and Debian's libibverbs1,
librdmacm1, libnuma1).
"""

from __future__ import annotations

import random
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..common.thread_errors import ThreadErrors
from .inprocess import InProcessCache
from .protocol import CacheEntry, CacheError, ReadResult, make_key, now_ns, storage_dtype

SIZE_MISMATCH, CHECKSUM, FETCH_FAILED, SUPERSEDED = (
    'size_mismatch',
    'checksum',
    'fetch_failed',
    'superseded',
)


SIZE_HEADROOM = 4096  # bytes beyond the expected size in the receive buffer
BUFFER_TOO_SMALL = -600  # get_into: the object is larger than the buffer


def object_name(robot: str, key: str) -> str:
    return f'wam/{robot or "robot"}/{key}'


def checksum(data) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def _connect(cfg, local_hostname: str, segment_bytes: int):
    """A store client (one transfer-engine endpoint at ``local_hostname``)."""
    try:
        from mooncake.store import MooncakeDistributedStore
    except ImportError as exc:
        raise CacheError(
            'the mooncake backend needs mooncake-transfer-engine-non-cuda '
            f'(scripts/setup.sh installs it): {exc}'
        ) from None
    # the master may still be starting (a launch file starts everything at once) or
    # restarting: retry until connect_timeout_s
    end = time.monotonic() + cfg.connect_timeout_s
    while True:
        store = MooncakeDistributedStore()
        rc = store.setup(
            local_hostname,
            cfg.metadata_server,
            segment_bytes,
            cfg.local_buffer_mb << 20,
            cfg.protocol,
            cfg.device_name,
            cfg.master_address,
        )
        if rc == 0:
            return store
        if time.monotonic() >= end:
            raise CacheError(
                f'cannot join the Mooncake Store at {cfg.master_address} (metadata '
                f'{cfg.metadata_server}) as {local_hostname} within {cfg.connect_timeout_s} s: '
                f'setup returned {rc}; is mooncake_master running?'
            )
        time.sleep(0.5)


class _SharedClient:
    """One store client per world-expert process, shared by its robots' writers: each
    client lends the store ``global_segment_mb``, so a fleet must not open one per robot."""

    _clients: dict[tuple, list] = {}  # (master, metadata, hostname) -> [store, users]
    _lock = threading.Lock()

    @classmethod
    def acquire(cls, cfg):
        key = (cfg.master_address, cfg.metadata_server, cfg.local_hostname)
        with cls._lock:
            if key not in cls._clients:
                cls._clients[key] = [
                    _connect(cfg, cfg.local_hostname, cfg.global_segment_mb << 20),
                    0,
                ]
            cls._clients[key][1] += 1
            return key, cls._clients[key][0]

    @classmethod
    def release(cls, key) -> None:
        with cls._lock:
            entry = cls._clients.get(key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                del cls._clients[key]
                entry[0].close()


class MooncakeWriter:
    """The world expert's side for one robot: put into the store, index locally."""

    backend = 'mooncake'

    def __init__(self, cfg, version: str, slot_shape, robot: str = '', capacity: int = 64):
        self.cfg = cfg
        self.robot = robot
        self.version = version
        self.capacity = capacity
        self.epoch = random.getrandbits(63)
        self.segment = ''  # per entry: the object name travels as the descriptor's segment
        self.shape = tuple(slot_shape)
        self._client_key, self._store = _SharedClient.acquire(cfg)
        self._entries: OrderedDict[str, CacheEntry] = OrderedDict()  # fingerprint -> entry
        self._slot = 0
        self.put_failures = 0

    def set_model_version(self, version: str) -> None:
        if version != self.version:
            self.version = version
            self._drop_all()

    def lookup(self, fingerprint: str) -> CacheEntry | None:
        """A repeated frame's entry, if its object is still in the store (a restarted
        master has lost it: then the frame is encoded and put again)."""
        entry = self._entries.get(fingerprint)
        if entry is not None and self._store.is_exist(object_name(self.robot, entry.key)) != 1:
            del self._entries[fingerprint]
            return None
        return entry

    def put(
        self, fingerprint: str, stamp_ns: int, array: np.ndarray, dtype: str | None = None
    ) -> CacheEntry:
        """``dtype``: the representation's dtype where the array stores it as other words
        (bfloat16 as uint16); the descriptor carries it, the reader views the bytes so."""
        data = np.ascontiguousarray(array).tobytes()
        key = make_key(fingerprint, self.version)
        name = object_name(self.robot, key)
        rc = self._store.put(name, data)
        if rc != 0 and self._store.is_exist(name) == 1:
            # an object of that name is there already (a put that timed out, another
            # encode of the frame): its bytes may differ from these, whose checksum the
            # descriptor will carry, so replace it
            self._store.remove(name, True)
            rc = self._store.put(name, data)
        if rc != 0:
            self.put_failures += 1
            raise CacheError(f'Mooncake Store put of {name} failed ({rc})')
        self._slot = (self._slot + 1) % (1 << 31)
        entry = CacheEntry(
            key,
            fingerprint,
            self.version,
            self._slot,
            0,
            int(stamp_ns),
            tuple(array.shape),
            dtype or str(array.dtype),
            self.epoch,
            checksum(data),
        )
        self._entries[fingerprint] = entry
        while len(self._entries) > self.capacity:  # our ring: the oldest object leaves
            _, old = self._entries.popitem(last=False)
            self._remove(old)
        return entry

    def touch(self, entry: CacheEntry, stamp_ns: int) -> CacheEntry:
        """A repeated identical frame: the object stays, the observation stamp moves."""
        if self._entries.get(entry.fingerprint) is None:
            raise CacheError(f'entry {entry.key} is no longer in the store')
        new = CacheEntry(
            entry.key,
            entry.fingerprint,
            entry.version,
            entry.slot,
            entry.sequence,
            int(stamp_ns),
            entry.shape,
            entry.dtype,
            entry.epoch,
            entry.checksum,
        )
        self._entries[entry.fingerprint] = new
        self._entries.move_to_end(entry.fingerprint)
        return new

    def object_of(self, entry: CacheEntry) -> str:
        return object_name(self.robot, entry.key)

    def _remove(self, entry: CacheEntry) -> None:
        # force: a reader's 10 s lease would keep it otherwise; a reader caught mid-transfer
        # gets bytes that fail the CRC and refuses them
        self._store.remove(object_name(self.robot, entry.key), True)

    def _drop_all(self) -> None:
        for entry in self._entries.values():
            self._remove(entry)
        self._entries.clear()

    def close(self) -> None:
        try:
            self._drop_all()
        finally:
            _SharedClient.release(self._client_key)


@dataclass(frozen=True)
class RemoteRepresentation:
    """What a descriptor says about a representation in the store."""

    name: str  # the store object
    key: str
    version: str
    stamp_ns: int
    shape: tuple[int, ...]
    dtype: str
    checksum: int
    epoch: int


class MooncakeReader:
    """An action expert's side: prefetch on descriptor arrival, read locally in the tick.

    ``prefetch`` never blocks; the fetch thread takes the newest waiting descriptor (an
    older one not yet fetched is superseded: the tick wants the newest observation),
    fetches, verifies and stores it in the local ring, then calls ``on_ready`` with the
    local entry, which the node hands to the ticker as its descriptor."""

    backend = 'mooncake'

    def __init__(
        self,
        cfg,
        ttl_ms: float,
        robot: str = '',
        capacity: int = 8,
        clock: Callable[[], int] = now_ns,
    ):
        self.cfg = cfg
        self.robot = robot
        self.local = InProcessCache(capacity, ttl_ms, '', clock)
        self.stats = self.local.stats  # the tick's reads: hits and refusals by reason
        self.fetch_refused: dict[str, int] = {}  # under _lock: two threads count
        self._lock = threading.Lock()
        self.fetches = 0
        # exceptions on the fetch thread (the node sets its logger and reports the counts)
        self.thread_errors = ThreadErrors()
        self.on_ready: Callable[[CacheEntry], None] | None = None  # a fetched entry
        self.on_fetch_ms: Callable[[float], None] | None = None  # each fetch's latency
        self._store = _connect(cfg, cfg.reader_hostname, 0)  # a reader lends no memory
        self._buffer: np.ndarray | None = None
        self._checksums: dict[str, tuple] = {}  # fingerprint -> what it was verified as
        self._pending: RemoteRepresentation | None = None
        self._wake = threading.Condition()
        self._running = True
        self._thread = threading.Thread(target=self._fetch_loop, name='repr_fetch', daemon=True)
        self._thread.start()

    @property
    def capacity(self) -> int:
        return self.local.capacity

    def set_ttl_ms(self, ttl_ms: float) -> None:
        self.local.set_ttl_ms(ttl_ms)

    def prefetch(self, rep: RemoteRepresentation) -> None:
        with self._wake:
            if self._pending is not None:
                self._refuse(SUPERSEDED)
            self._pending = (rep, time.perf_counter())  # fetch latency from arrival
            self._wake.notify()

    def _refuse(self, reason: str) -> None:
        with self._lock:
            self.fetch_refused[reason] = self.fetch_refused.get(reason, 0) + 1

    def refused_counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self.fetch_refused)

    def _fetch_loop(self) -> None:
        while True:
            with self._wake:
                while self._pending is None and self._running:
                    self._wake.wait()
                if not self._running:
                    return
                (rep, arrived), self._pending = self._pending, None
            try:
                entry = self._fetch(rep, arrived)
                if entry is not None and self.on_ready is not None:
                    self.on_ready(entry)
            except Exception as exc:  # the store went away mid-call: the tick sees no entry
                self._refuse(FETCH_FAILED)
                self.thread_errors.record(exc, 'repr_fetch')  # counted, logged with its trace

    def _fetch(self, rep: RemoteRepresentation, arrived: float) -> CacheEntry | None:
        try:
            dtype = storage_dtype(rep.dtype)
        except CacheError:
            self._refuse(SIZE_MISMATCH)
            return None
        nbytes = int(np.prod(rep.shape)) * dtype.itemsize
        if nbytes <= 0:
            self._refuse(SIZE_MISMATCH)
            return None
        fingerprint = rep.key.rsplit(':', 1)[0]
        self.local.set_model_version(rep.version)  # the tick refuses another version
        known = self.local.lookup(fingerprint)
        if known is not None and self._checksums.get(fingerprint) == (
            rep.checksum,
            rep.shape,
            rep.dtype,
        ):  # the same observation again (a static scene), verified when fetched: no fetch
            return self.local.touch(known, rep.stamp_ns)
        # one call, no size query first: the buffer has room beyond the expected size, so
        # an object of another size comes back with its own length (or "buffer too
        # small") rather than truncated to look right
        buf = self._buffer_for(nbytes + SIZE_HEADROOM)
        got = self._store.get_into(rep.name, buf.ctypes.data, buf.nbytes)
        if got != nbytes:
            self._refuse(SIZE_MISMATCH if got >= 0 or got == BUFFER_TOO_SMALL else FETCH_FAILED)
            return None
        data = buf[:nbytes]
        if checksum(data) != rep.checksum:
            self._refuse(CHECKSUM)
            return None
        array = data.view(dtype).reshape(rep.shape).copy()
        if self.on_fetch_ms is not None:  # descriptor arrival -> tensor verified
            self.on_fetch_ms((time.perf_counter() - arrived) * 1e3)
        self.fetches += 1
        self._checksums[fingerprint] = (rep.checksum, rep.shape, rep.dtype)
        while len(self._checksums) > 4 * self.local.capacity:
            self._checksums.pop(next(iter(self._checksums)))
        return self.local.put(fingerprint, rep.stamp_ns, array, rep.dtype)

    def _buffer_for(self, nbytes: int) -> np.ndarray:
        """One registered receive buffer (the transfer engine writes into it directly)."""
        if self._buffer is None or self._buffer.nbytes < nbytes:
            if self._buffer is not None:
                self._store.unregister_buffer(self._buffer.ctypes.data)
            self._buffer = np.empty(nbytes, dtype=np.uint8)
            rc = self._store.register_buffer(self._buffer.ctypes.data, nbytes)
            if rc != 0:
                raise CacheError(f'cannot register a {nbytes} B receive buffer ({rc})')
        return self._buffer

    def read(self, slot, version, key=None, epoch=None, copy_into=None) -> ReadResult:
        return self.local.read(slot, version, key, None, copy_into)

    def latest(self, version: str, copy_into: np.ndarray | None = None) -> ReadResult:
        return self.local.latest(version, copy_into)

    def close(self) -> None:
        with self._wake:
            self._running = False
            self._wake.notify()
        self._thread.join(timeout=5.0)
        if self._thread.is_alive():  # stuck in a store call: closing under it is worse
            return
        if self._buffer is not None:
            self._store.unregister_buffer(self._buffer.ctypes.data)
        self._store.close()
