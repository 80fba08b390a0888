"""Representation cache: version, TTL, seqlock, capacity, segment hygiene."""

import multiprocessing as mp
import os
import signal
import stat
import time
import uuid

import numpy as np
import pytest

from wam_core.cache.inprocess import InProcessCache
from wam_core.cache.protocol import MISS, STALE, VERSION, CacheError
from wam_core.cache.shm import ShmRingReader, ShmRingWriter, shm_path

FP = 'ab' * 16
SHAPE = (65, 192)


class Clock:
    def __init__(self, t=1_000_000_000):
        self.t = t

    def __call__(self):
        return self.t


@pytest.fixture
def name():
    n = f'wam_test_{uuid.uuid4().hex[:12]}'
    yield n
    try:
        os.unlink(shm_path(n))
    except FileNotFoundError:
        pass


def _arr(v):
    return np.full(SHAPE, v, np.float32)


# ---------------------------------------------------------------- in-process
def test_inprocess_is_zero_copy_and_checks_version_and_ttl():
    clock = Clock()
    c = InProcessCache(4, ttl_ms=50, version='v1', clock=clock)
    a = _arr(1)
    e = c.put(FP, clock.t, a)
    r = c.read(e.slot, 'v1', key=e.key)
    assert r.ok and r.array is a and r.still_valid()
    assert not c.read(e.slot, 'v2').ok and c.read(e.slot, 'v2').reason == VERSION
    clock.t += 51_000_000
    assert c.read(e.slot, 'v1').reason == STALE
    e2 = c.touch(e, clock.t)  # identical frame: fresh stamp, same array
    assert c.read(e2.slot, 'v1').ok and c.lookup(FP) == e2


def test_inprocess_capacity_evicts_oldest_and_version_change_empties():
    clock = Clock()
    c = InProcessCache(2, ttl_ms=50, version='v1', clock=clock)
    e0 = c.put('00' * 16, clock.t, _arr(0))
    r0 = c.read(e0.slot, 'v1')
    c.put('11' * 16, clock.t, _arr(1))
    c.put('22' * 16, clock.t, _arr(2))  # overwrites slot of e0
    assert c.lookup('00' * 16) is None and c.lookup('22' * 16) is not None
    assert not r0.still_valid()  # a reader holding e0 learns it is gone
    c.set_model_version('v2')
    assert c.lookup('22' * 16) is None and c.latest('v2').reason == MISS


# ---------------------------------------------------------------- shared memory
def test_shm_segment_is_0600_ours_and_unlinked_on_close(name):
    w = ShmRingWriter(name, 4, SHAPE, 'v1')
    st = os.stat(shm_path(name))
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()
    w.close()
    assert not os.path.exists(shm_path(name))


def test_shm_reader_sees_writer_entries_with_version_and_ttl(name):
    w = ShmRingWriter(name, 4, SHAPE, 'v1')
    try:
        e = w.put(FP, time.time_ns(), _arr(7))
        r = ShmRingReader(name, ttl_ms=50)
        res = r.read(e.slot, 'v1', key=e.key, epoch=e.epoch)
        assert (
            res.ok
            and res.array.shape == SHAPE
            and float(res.array[3, 4]) == 7.0
            and res.still_valid()
        )
        assert r.read(e.slot, 'v2').reason == VERSION
        assert r.latest('v1').ok
        w.set_model_version('v2')  # version change empties the cache
        assert r.latest('v2').reason == MISS and r.read(e.slot, 'v1').ok is False
        e2 = w.put(FP, time.time_ns() - 60_000_000, _arr(1))
        assert r.read(e2.slot, 'v2').reason == STALE
        r.close()
    finally:
        w.close()


def test_shm_reader_refuses_group_or_world_accessible_segment(name):
    w = ShmRingWriter(name, 2, SHAPE, 'v1')
    try:
        os.chmod(shm_path(name), 0o644)
        with pytest.raises(CacheError, match='0600'):
            ShmRingReader(name, ttl_ms=50)
    finally:
        w.close()


def _crashing_writer(name, ready):
    w = ShmRingWriter(name, 2, SHAPE, 'v1')
    w.put(FP, time.time_ns(), _arr(1))
    ready.set()
    time.sleep(60)


def test_shm_segment_of_a_crashed_writer_is_reclaimed(name):
    ctx = mp.get_context('spawn')
    ready = ctx.Event()
    p = ctx.Process(target=_crashing_writer, args=(name, ready))
    p.start()
    assert ready.wait(30)
    with pytest.raises(CacheError, match='live writer'):
        ShmRingWriter(name, 2, SHAPE, 'v1')  # the owner is alive: refuse
    os.kill(p.pid, signal.SIGKILL)
    p.join()
    assert os.path.exists(shm_path(name))  # kill -9 left it behind
    logs = []
    w = ShmRingWriter(name, 2, SHAPE, 'v1', logger=logs.append)
    assert w.reclaimed and 'reclaimed' in logs[0]
    w.close()


def test_shm_reader_reattaches_after_writer_restart(name):
    w = ShmRingWriter(name, 2, SHAPE, 'v1')
    r = ShmRingReader(name, ttl_ms=1000)
    e = w.put(FP, time.time_ns(), _arr(1))
    assert r.read(e.slot, 'v1', epoch=e.epoch).ok
    w.close()
    w2 = ShmRingWriter(name, 2, SHAPE, 'v1')
    e2 = w2.put('cd' * 16, time.time_ns(), _arr(2))
    res = r.read(e2.slot, 'v1', key=e2.key, epoch=e2.epoch)  # new epoch -> re-attach
    assert res.ok and float(res.array[0, 0]) == 2.0
    r.close()
    w2.close()


# ---------------------------------------------------------------- torn reads
def _hammer_writer(name, seconds, started):
    w = ShmRingWriter(name, 1, SHAPE, 'v1')  # one slot: every write rewrites what readers read
    started.set()
    buf = np.empty(SHAPE, np.float32)
    end = time.monotonic() + seconds
    k = 0
    while time.monotonic() < end:
        k += 1
        buf.fill(k)
        w.put(f'{k % 256:02x}' * 16, time.time_ns(), buf)
    w.close()


def _hammer_reader(name, seconds, out):
    r = ShmRingReader(name, ttl_ms=10_000)
    ok = torn = bad = 0
    snap = np.empty(SHAPE, np.float32)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        # zero-copy path: use the view, then re-check the sequence
        res = r.read(0, 'v1')
        if res.ok:
            snap[...] = res.array
            if res.still_valid():
                ok += 1
                if snap.min() != snap.max():
                    bad += 1
            else:
                torn += 1
        elif res.reason == 'torn':
            torn += 1
        # copying path
        res = r.read(0, 'v1', copy_into=snap)
        if res.ok:
            ok += 1
            if snap.min() != snap.max():
                bad += 1
    out.put((ok, torn, bad))


def test_writer_and_reader_processes_hammer_the_ring_without_a_torn_read(name):
    ctx = mp.get_context('spawn')
    started, out = ctx.Event(), ctx.Queue()
    w = ctx.Process(target=_hammer_writer, args=(name, 4.0, started))
    w.start()
    assert started.wait(30)
    readers = [ctx.Process(target=_hammer_reader, args=(name, 3.0, out)) for _ in range(2)]
    for r in readers:
        r.start()
    results = [out.get(timeout=60) for _ in readers]
    for r in readers:
        r.join()
    w.join()
    ok = sum(x[0] for x in results)
    torn = sum(x[1] for x in results)
    bad = sum(x[2] for x in results)
    assert ok > 100, results  # reads did succeed
    assert torn > 0, results  # and the writer really did race them
    assert bad == 0, f'{bad} torn entries were returned as valid'
    assert not os.path.exists(shm_path(name))


def test_the_shm_ring_refuses_a_machine_without_total_store_order(name, monkeypatch):
    """Its seqlock relies on x86-64's store ordering: on aarch64 (a Jetson) both ends
    refuse with the reason, and nothing is left in /dev/shm (issue 24, item 9)."""
    import platform

    monkeypatch.setattr(platform, 'machine', lambda: 'aarch64')
    with pytest.raises(CacheError, match='x86-64 total store order and this machine is aarch64'):
        ShmRingWriter(name, 4, SHAPE, 'v1')
    assert not os.path.exists(shm_path(name))
    with pytest.raises(CacheError, match='aarch64: use repr_cache.backend inprocess'):
        ShmRingReader(name, ttl_ms=50)


@pytest.mark.parametrize(
    'reader_version, wrong_key, age_ms, reason',
    [
        ('v2', True, 500, VERSION),  # every rule broken: the version decides
        ('v1', True, 500, 'key_mismatch'),
        ('v1', False, 500, STALE),
        ('v1', False, 10, ''),
    ],
)
def test_every_backend_refuses_an_entry_for_the_same_reason(
    name, reader_version, wrong_key, age_ms, reason
):
    clock = Clock()
    inproc = InProcessCache(4, ttl_ms=50, version='v1', clock=clock)
    writer = ShmRingWriter(name, 4, SHAPE, 'v1')
    reader = ShmRingReader(name, ttl_ms=50, clock=clock)
    try:
        got = []
        for w, r in ((inproc, inproc), (writer, reader)):
            e = w.put(FP, clock.t, _arr(1))
            clock.t += int(age_ms * 1e6)
            res = r.read(e.slot, reader_version, key='x' if wrong_key else e.key)
            clock.t -= int(age_ms * 1e6)
            got.append(res.reason)
        assert got == [reason, reason]
    finally:
        reader.close()
        writer.close()
