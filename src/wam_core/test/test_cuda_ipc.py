"""The cuda_ipc backend: what runs without a GPU here, and the device test where one is.

The ring's protocol (the host segment's header with the device memory's handle, the
seqlock, TTL, version, re-attach after a writer restart, crash reclaim, refusals) is the
same code whatever the memory is; on the CPU it runs against ``HostMemory``, a stand-in
for ``CudaMemory`` whose "handle" names a POSIX shared-memory file. ``CudaMemory`` itself
only runs in the device test, which skips here with the reason "no CUDA device".
"""

import mmap
import os
import secrets
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

from wam_core.cache.cuda_ipc import CudaIpcRingReader, CudaIpcRingWriter, cuda_unavailable
from wam_core.cache.factory import open_cache_writer
from wam_core.cache.protocol import CacheError
from wam_core.cache.shm import (
    DATA_ON_DEVICE,
    H_DATA_LOCATION,
    H_PID,
    S_SEQ,
    ShmRingReader,
    ShmRingWriter,
    shm_path,
)
from wam_core.common.config import ReprCacheWriterConfig

FP = 'ab' * 16
SHAPE = (130, 192)
NO_CUDA = cuda_unavailable()


class HostMemory:
    """Host stand-in for ``CudaMemory`` (same methods): the region is a /dev/shm file and
    its handle is that file's name, so a reader 'opens the handle' by mapping the file."""

    allocated: list = []  # names of every region made (the tests unlink them)
    closed: list = []  # (name, opened from a handle) of every region closed

    def __init__(self, name: str, nbytes: int, create: bool):
        self.name, self.nbytes, self.from_handle = name, nbytes, not create
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(shm_path(name), flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, nbytes)
            self._mm = mmap.mmap(fd, nbytes)
        finally:
            os.close(fd)
        self._tensor = torch.frombuffer(self._mm, dtype=torch.uint8)

    @staticmethod
    def check(device: int) -> None:
        pass

    @classmethod
    def allocate(cls, nbytes: int, device: int):
        mem = cls(f'wam_test_dev_{secrets.token_hex(6)}', nbytes, create=True)
        cls.allocated.append(mem.name)
        return mem

    @classmethod
    def open(cls, handle: bytes, nbytes: int, device: int):
        return cls(handle.decode(), nbytes, create=False)

    def handle(self) -> bytes:
        return self.name.encode()

    def tensor(self):
        return self._tensor

    def synchronize(self) -> None:
        pass

    def close(self) -> None:
        self._tensor = None
        HostMemory.closed.append((self.name, self.from_handle))


@pytest.fixture
def seg():
    name = f'wam_test_cuda_{secrets.token_hex(6)}'
    made = []
    yield name, made
    for w in made:
        w.close()
    for n in [name, *HostMemory.allocated]:
        if os.path.exists(shm_path(n)):
            os.unlink(shm_path(n))


def writer(seg, version='v1', **kw):
    name, made = seg
    w = CudaIpcRingWriter(name, 4, SHAPE, version, memory=HostMemory, **kw)
    made.append(w)
    return w


@pytest.mark.skipif(not NO_CUDA, reason='this machine has a CUDA device')
def test_without_a_gpu_selecting_cuda_ipc_fails_with_the_reason_and_leaves_nothing():
    assert 'no CUDA device' in NO_CUDA
    cfg = ReprCacheWriterConfig(backend='cuda_ipc', shm_name=f'wam_test_{secrets.token_hex(4)}')
    with pytest.raises(CacheError, match='no CUDA device'):
        open_cache_writer(cfg, 'v1', SHAPE)
    assert not os.path.exists(shm_path(cfg.shm_name))


def test_a_slot_is_read_in_place_from_the_region_the_handle_names(seg):
    w = writer(seg)
    r = CudaIpcRingReader(seg[0], ttl_ms=1e6, memory=HostMemory)
    rep = torch.randn(SHAPE)
    e = w.put(FP, time.time_ns(), rep)
    res = r.read(e.slot, 'v1', e.key, e.epoch)
    assert res.ok and torch.equal(res.array, rep) and res.still_valid()
    assert res.array.data_ptr() == r.memory.tensor().data_ptr() + e.slot * r._l.slot_bytes
    # the header says where the data is; the handle was opened once, not per read
    assert int(r._l.hdr[H_DATA_LOCATION]) == DATA_ON_DEVICE
    for _ in range(50):
        assert r.read(e.slot, 'v1', e.key, e.epoch).ok
    assert r.handles_opened == 1
    # a numpy array of the ring's dtype is accepted (uploaded); copy_into copies
    e2 = w.put('cd' * 16, time.time_ns(), rep.numpy() * 2)
    into = torch.empty(SHAPE)
    res = r.read(e2.slot, 'v1', e2.key, e2.epoch, copy_into=into)
    assert res.ok and res.array is into and torch.equal(into, rep * 2)
    assert os.stat(shm_path(seg[0])).st_mode & 0o777 == 0o600


def test_a_bfloat16_ring_takes_tensors_and_host_words_and_reads_bfloat16(seg):
    """A π0 prefix in bf16: the ring is typed bfloat16; a device tensor goes in as it is,
    a host array as its 16-bit words (how the world expert hands bf16 to a host cache);
    the reader gets bfloat16 back, and a float32 tensor is refused."""
    name, made = seg
    w = CudaIpcRingWriter(name, 2, (5, 16, 8), 'v1', 'bfloat16', memory=HostMemory)
    made.append(w)
    r = CudaIpcRingReader(name, ttl_ms=1e6, memory=HostMemory)
    rep = torch.randn((5, 16, 8)).to(torch.bfloat16)
    e = w.put(FP, time.time_ns(), rep, 'bfloat16')
    res = r.read(e.slot, 'v1', e.key, e.epoch)
    assert res.ok and res.entry.dtype == 'bfloat16' and res.array.dtype == torch.bfloat16
    assert torch.equal(res.array, rep)
    words = (rep * 2).view(torch.int16).numpy().view(np.uint16)
    e2 = w.put('cd' * 16, time.time_ns(), words, 'bfloat16')
    assert torch.equal(r.read(e2.slot, 'v1', e2.key, e2.epoch).array, rep * 2)
    with pytest.raises(CacheError, match='does not fit'):
        w.put('ef' * 16, time.time_ns(), rep.float())
    with pytest.raises(CacheError, match='a float32 representation in a ring of bfloat16'):
        w.put('ef' * 16, time.time_ns(), rep, 'float32')


def test_refusals_are_the_shm_backend_s(seg):
    now = [10_000_000_000]
    w = writer(seg)
    r = CudaIpcRingReader(seg[0], ttl_ms=50, memory=HostMemory, clock=lambda: now[0])
    e = w.put(FP, now[0], torch.ones(SHAPE))
    assert r.read(e.slot, 'v2', e.key, e.epoch).reason == 'version_mismatch'
    now[0] += 51_000_000
    assert r.read(e.slot, 'v1', e.key, e.epoch).reason == 'stale'
    now[0] -= 51_000_000
    res = r.read(e.slot, 'v1', e.key, e.epoch)
    assert res.ok
    words = w._l.slot_words[e.slot]
    words[S_SEQ] += 1  # the writer is mid-write
    assert r.read(e.slot, 'v1', e.key, e.epoch).reason == 'torn'
    assert not res.still_valid()  # a view taken before the rewrite is no longer valid
    words[S_SEQ] += 1
    with pytest.raises(CacheError, match='does not fit'):
        w.put(FP, now[0], torch.ones(SHAPE, dtype=torch.float64))
    with pytest.raises(CacheError, match='does not fit'):
        w.put(FP, now[0], torch.ones(200, 192))


def test_the_shm_and_cuda_ipc_readers_refuse_each_other_s_segments(seg):
    writer(seg)
    with pytest.raises(CacheError, match='device memory.*cuda_ipc'):
        ShmRingReader(seg[0], ttl_ms=50)
    other = f'{seg[0]}_host'
    w = ShmRingWriter(other, 2, SHAPE, 'v1')
    try:
        with pytest.raises(CacheError, match='shm backend'):
            CudaIpcRingReader(other, ttl_ms=50, memory=HostMemory)
    finally:
        w.close()


def test_a_restarted_writer_s_new_region_is_opened_and_the_old_one_closed(seg):
    w = writer(seg)
    r = CudaIpcRingReader(seg[0], ttl_ms=1e6, memory=HostMemory)
    e = w.put(FP, time.time_ns(), torch.ones(SHAPE))
    assert r.read(e.slot, 'v1', e.key, e.epoch).ok
    first = r.memory.name
    w.close()
    w2 = writer(seg)
    e2 = w2.put(FP, time.time_ns(), torch.full(SHAPE, 3.0))
    assert e2.epoch != e.epoch
    res = r.read(e2.slot, 'v1', e2.key, e2.epoch)  # the descriptor's epoch is new: re-attach
    assert res.ok and float(res.array[0, 0]) == 3.0
    # the reader closed its mapping of the old region and opened the new one
    assert r.handles_opened == 2 and (first, True) in HostMemory.closed
    assert r.memory.name == w2.memory.name != first


def test_a_crashed_writer_s_segment_is_reclaimed(seg):
    w = writer(seg)
    w._l.hdr[H_PID] = 2**22 + 12345  # no such process: as if the writer had crashed
    w._closed = True  # it never closed the segment
    w2 = writer(seg)
    assert w2.reclaimed and w2.put(FP, 1, torch.ones(SHAPE)).slot == 0


@pytest.mark.skipif(bool(NO_CUDA), reason='no CUDA device')
def test_on_the_device_another_process_reads_the_slot_in_place(seg):
    """Real CUDA IPC: the writer here, a reader in a fresh process (not run on this machine)."""
    name, made = seg
    w = CudaIpcRingWriter(name, 4, SHAPE, 'v1')
    made.append(w)
    rep = torch.arange(np.prod(SHAPE), dtype=torch.float32, device='cuda').reshape(SHAPE)
    e = w.put(FP, time.time_ns(), rep)
    code = textwrap.dedent(
        f"""
        from wam_core.cache.cuda_ipc import CudaIpcRingReader
        r = CudaIpcRingReader({name!r}, ttl_ms=1e9)
        res = r.read({e.slot}, 'v1', {e.key!r}, {e.epoch})
        assert res.ok, res.reason
        assert res.array.is_cuda
        print(float(res.array.sum()), res.still_valid())
        """
    )
    out = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=120, check=True
    )
    total, valid = out.stdout.split()
    assert float(total) == pytest.approx(float(rep.sum()), rel=1e-6) and valid == 'True'
