"""The mooncake backend against a real mooncake_master, across two processes (no ROS).

The world-host side (writer) runs in a child process bound to 127.0.0.2, the robot-host
side (reader) here at 127.0.0.3; traffic stays on loopback.
"""

import multiprocessing as mp
import time

import numpy as np
import pytest

from wam_core.cache.mooncake import (
    CHECKSUM,
    SIZE_MISMATCH,
    MooncakeReader,
    MooncakeWriter,
    RemoteRepresentation,
)
from wam_core.cache.mooncake_master import MooncakeMaster
from wam_core.cache.protocol import STALE, VERSION
from wam_core.common.process import free_port

pytest.importorskip('mooncake.store', reason='mooncake-transfer-engine-non-cuda not installed')

WORLD_HOST, ROBOT_HOST = '127.0.0.2', '127.0.0.3'
SHAPE = (65, 192)


@pytest.fixture(scope='module')
def master():
    m = MooncakeMaster(WORLD_HOST, free_port(WORLD_HOST), free_port(WORLD_HOST)).start()
    try:
        m.wait_ready(20)
        yield m
    finally:
        m.stop()


def _cfg(m, local_hostname=WORLD_HOST, **change):
    sizes = {'global_segment_mb': 16, 'local_buffer_mb': 4}
    return m.client_config(local_hostname, ROBOT_HOST, **{**sizes, **change})


def _writer_proc(cfg, q_in, q_out):
    """The world host: put what it is told, report each entry's descriptor fields."""
    w = MooncakeWriter(cfg, 'v1', SHAPE, robot='robot1', capacity=4)
    while True:
        job = q_in.get()
        if job is None:
            break
        fp, seed = job
        arr = np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)
        e = w.put(fp, time.time_ns(), arr)
        q_out.put((w.object_of(e), e.key, e.version, e.stamp_ns, e.checksum, float(arr.sum())))
    w.close()


def _remote(desc, **change):
    name, key, version, stamp, crc, _ = desc
    fields = dict(
        name=name,
        key=key,
        version=version,
        stamp_ns=stamp,
        shape=SHAPE,
        dtype='float32',
        checksum=crc,
        epoch=1,
    )
    fields.update(change)
    return RemoteRepresentation(**fields)


def _wait(pred, timeout=5.0):
    end = time.monotonic() + timeout
    while not pred() and time.monotonic() < end:
        time.sleep(0.005)
    return pred()


def test_fetch_across_processes_on_descriptor_and_refusals(master):
    cfg = _cfg(master)
    ctx = mp.get_context('spawn')
    q_in, q_out = ctx.Queue(), ctx.Queue()
    writer = ctx.Process(target=_writer_proc, args=(cfg, q_in, q_out), daemon=True)
    writer.start()
    reader = MooncakeReader(cfg, ttl_ms=1000.0, robot='robot1')
    ready, fetch_ms = [], []
    reader.on_ready = ready.append
    reader.on_fetch_ms = fetch_ms.append
    try:
        q_in.put(('fp0', 0))
        d0 = q_out.get(timeout=30)
        reader.prefetch(_remote(d0))
        assert _wait(lambda: len(ready) == 1), reader.fetch_refused
        entry = ready[0]
        got = reader.read(entry.slot, 'v1', entry.key)
        assert got.ok and got.array.shape == SHAPE
        assert got.array.sum() == pytest.approx(d0[5], rel=1e-5)  # the writer's bytes
        assert len(fetch_ms) == 1 and fetch_ms[0] > 0
        # wrong size, wrong checksum: refused with the reason, nothing reaches the ring
        reader.prefetch(_remote(d0, shape=(64, 192)))
        assert _wait(lambda: reader.fetch_refused.get(SIZE_MISMATCH) == 1)
        q_in.put(('fp1', 1))
        d1 = q_out.get(timeout=10)
        reader.prefetch(_remote(d1, checksum=d1[4] ^ 1))
        assert _wait(lambda: reader.fetch_refused.get(CHECKSUM) == 1)
        assert len(ready) == 1
        # the version and TTL rules of every backend apply at the tick's read
        assert reader.read(entry.slot, 'v2', entry.key).reason == VERSION
        old = _remote(d1, stamp_ns=time.time_ns() - 5_000_000_000)
        reader.prefetch(old)
        assert _wait(lambda: len(ready) == 2)
        assert reader.read(ready[1].slot, 'v1', ready[1].key).reason == STALE
        # the writer keeps `capacity` objects: the oldest leave the store
        for i in range(2, 7):
            q_in.put((f'fp{i}', i))
            q_out.get(timeout=10)
        fresh = MooncakeReader(cfg, ttl_ms=1000.0, robot='robot1')  # nothing local yet
        try:
            fresh.prefetch(_remote(d0))
            _wait(lambda: fresh.fetch_refused or fresh.fetches, 5)
            assert fresh.fetch_refused == {'fetch_failed': 1}, (fresh.fetch_refused, fresh.fetches)
        finally:
            fresh.close()
    finally:
        q_in.put(None)
        writer.join(timeout=20)
        reader.close()


BIG = (37, 304, 256)  # π0 base's prefix with one camera: 18 layers x 2 + the mask plane


def _big_writer_proc(cfg, q_out, q_done):
    """The world host puts one megabyte bfloat16 representation (as its 16-bit words)."""
    w = MooncakeWriter(cfg, 'v1', BIG, robot='robot1', capacity=2)
    words = np.random.default_rng(3).integers(0, 1 << 16, BIG, dtype=np.uint16)
    e = w.put('big', time.time_ns(), words, 'bfloat16')
    q_out.put((w.object_of(e), e.key, e.version, e.stamp_ns, e.checksum, e.dtype, words.sum()))
    q_done.get(timeout=60)  # until the reader has fetched it
    w.close()


def test_a_megabyte_bfloat16_prefix_crosses_hosts_intact(master):
    cfg = _cfg(master, global_segment_mb=32, local_buffer_mb=16)
    ctx = mp.get_context('spawn')
    q_out, q_done = ctx.Queue(), ctx.Queue()
    writer = ctx.Process(target=_big_writer_proc, args=(cfg, q_out, q_done), daemon=True)
    writer.start()
    reader = MooncakeReader(cfg, ttl_ms=10_000.0, robot='robot1')
    ready, fetch_ms = [], []
    reader.on_ready = ready.append
    reader.on_fetch_ms = fetch_ms.append
    try:
        name, key, version, stamp, crc, dtype, total = q_out.get(timeout=30)
        assert dtype == 'bfloat16'
        reader.prefetch(RemoteRepresentation(name, key, version, stamp, BIG, dtype, crc, 1))
        assert _wait(lambda: len(ready) == 1, 10), reader.fetch_refused
        got = reader.read(ready[0].slot, 'v1', ready[0].key)
        assert got.ok and got.entry.dtype == 'bfloat16'
        assert got.array.dtype == np.uint16 and got.array.shape == BIG
        assert got.array.nbytes == 37 * 304 * 256 * 2  # 5.8 MB
        assert int(got.array.sum()) == int(total)  # the writer's words, checksum verified
        assert fetch_ms and fetch_ms[0] > 0
    finally:
        q_done.put(None)
        reader.close()
        writer.join(timeout=20)


def test_the_master_listens_on_its_host_except_its_metadata_servers_own_choice(master):
    """Its RPC and metrics servers bind the host it is given; the HTTP metadata server
    binds 0.0.0.0 whatever --http_metadata_server_host says (this build ignores the flag):
    docs/reliability.md names that port for a robot network's firewall. No other port."""
    import psutil

    listening = {
        (c.laddr.ip, c.laddr.port)
        for c in psutil.Process(master.proc.pid).net_connections(kind='inet')
        if c.status == psutil.CONN_LISTEN
    }
    assert (WORLD_HOST, master.rpc_port) in listening
    assert (WORLD_HOST, master.metrics_port) in listening
    http = {ip for ip, port in listening if port == master.http_port}
    assert http and http <= {WORLD_HOST, '0.0.0.0'}, listening
    known = {master.rpc_port, master.metrics_port, master.http_port}
    assert {port for _, port in listening} <= known, listening


def _mounted_client_proc(cfg, q_in, q_out):
    """A world expert's store client: mounted until told to close."""
    w = MooncakeWriter(cfg, 'v1', SHAPE, robot='robot1', capacity=4)
    q_out.put('mounted')
    q_in.get()
    w.close()
    q_out.put('closed')


def _foreground_master(host):
    """``python -m wam_core.cache.mooncake_master`` as a launch file runs it, and a
    mounted client in a child process."""
    import subprocess
    import sys

    rpc, http = free_port(host), free_port(host)
    proc = subprocess.Popen(
        [sys.executable, '-m', 'wam_core.cache.mooncake_master', '--host', host]
        + ['--rpc-port', str(rpc), '--http-port', str(http), '--linger-s', '8'],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert 'ready' in proc.stdout.readline()
    cfg = _cfg(MooncakeMaster(host, rpc, http), local_hostname=host)
    ctx = mp.get_context('spawn')
    q_in, q_out = ctx.Queue(), ctx.Queue()
    client = ctx.Process(target=_mounted_client_proc, args=(cfg, q_in, q_out), daemon=True)
    client.start()
    assert q_out.get(timeout=30) == 'mounted'
    return proc, client, q_in, q_out


def test_a_stopped_master_serves_on_until_its_clients_closed_their_store():
    """Ctrl-C reaches the master and the world expert at once: the master must outlive the
    world expert's store, or a put in flight hangs and the expert aborts in teardown."""
    import signal

    proc, client, q_in, q_out = _foreground_master('127.0.0.6')
    try:
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGINT)  # the terminal's and launch's
        time.sleep(1.0)
        assert proc.poll() is None, 'the master left while a client was still mounted'
        q_in.put('close')
        assert q_out.get(timeout=20) == 'closed'
        assert proc.wait(timeout=10) == 0
        assert 'stopping: no client mounted' in proc.stdout.read()
    finally:
        client.kill()
        proc.kill()


def test_a_sigterm_while_the_master_lingers_ends_it():
    """launch escalates to SIGTERM after 5 s: then the master goes at once."""
    import signal

    proc, client, _, _ = _foreground_master('127.0.0.7')
    try:
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert proc.poll() is None
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
        assert time.monotonic() - t0 < 3.0
        assert 'stopping: SIGTERM' in proc.stdout.read()
    finally:
        client.kill()
        proc.kill()


def test_a_store_client_listens_on_every_interface_whatever_its_host(master):
    """A store client (the world expert, an action expert reading from the store) opens
    two ports of its own at setup, on every interface, not on its ``local_hostname``:
    docs/reliability.md tells a robot network to firewall them. This checks that the
    page still says what the library does."""
    import psutil

    ctx = mp.get_context('spawn')
    q_in, q_out = ctx.Queue(), ctx.Queue()
    client = ctx.Process(target=_mounted_client_proc, args=(_cfg(master), q_in, q_out))
    client.start()
    try:
        assert q_out.get(timeout=30) == 'mounted'
        listening = {
            (c.laddr.ip, c.laddr.port)
            for c in psutil.Process(client.pid).net_connections(kind='inet')
            if c.status == psutil.CONN_LISTEN
        }
        assert listening, 'the client listens on nothing'
        assert {ip for ip, _ in listening} <= {'0.0.0.0', '::', WORLD_HOST}, listening
        assert {ip for ip, _ in listening} & {'0.0.0.0', '::'}, listening
        q_in.put('close')
        assert q_out.get(timeout=20) == 'closed'
    finally:
        client.kill()
