#!/usr/bin/env python3
"""The cross-host read by itself: three ways to move a representation between hosts.

    python bench/mooncake_read.py [--robots 4] [--seconds 12] [--loads none,cpu]
                                  [--designs store,read,push]

`bench/fleet.py` measures the Mooncake fetch inside a fleet (descriptor arrival -> the
tensor verified in the action expert's local ring), where it shares two cores with
everything else. This bench takes the fleet away: one world-host process (127.0.0.2) puts
``--robots`` representations of the shipped two-view model's shape (130 x 192 float32,
~100 KB) at 30 Hz each, one robot-host process (127.0.0.3) receives them, and a
mooncake_master joins them. Designs:

- ``store``: what the product does (``wam_core.cache.mooncake``): the world puts into the
  Mooncake Store, the reader ``get_into``s its registered buffer by object name (the
  master resolves the name to a replica, then the transfer engine reads it).
- ``read``: the same object read one-sided with the transfer engine at the replica's
  address (sent beside the name), without asking the master.
- ``push``: the reader registers a ring with its own transfer engine and the world host
  writes each representation into it before it sends the descriptor; the reader then
  only verifies. Its latency is the world's write (which would delay the descriptor)
  plus the reader's check.

Each is timed on the reader from the descriptor's arrival to the checked bytes (``push``:
the world's write + that), with ``--loads``: ``none`` (nothing else running) and ``cpu``
(two busy processes: the host's two cores full, as a fleet beyond its capacity keeps
them). Writes section ``mooncake_read`` of bench/report.json and prints each design's
percentiles with the ratio of its p99 to the store's under the same load.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
import zlib

import numpy as np

from wam_core.cache.mooncake import MooncakeWriter, _connect
from wam_core.cache.mooncake_master import MooncakeMaster
from wam_core.common.config import MooncakeConfig
from wam_core.common.process import free_port
from wam_system_tests.report import update_report

WORLD_HOST, ROBOT_HOST = '127.0.0.2', '127.0.0.3'
SHAPE = (130, 192)  # the shipped world expert: 2 views x 65 tokens x 192
NBYTES = int(np.prod(SHAPE)) * 4
RING = 8  # push: slots per robot on the robot host
CAMERA_HZ = 30.0


def _engine(hostname: str, cfg: MooncakeConfig):
    from mooncake.engine import TransferEngine

    te = TransferEngine()
    rc = te.initialize(hostname, cfg.metadata_server, cfg.protocol, cfg.device_name)
    if rc != 0:
        raise RuntimeError(f'transfer engine at {hostname}: initialize returned {rc}')
    return te, hostname  # its segment's name in the metadata


def _world(cfg, design: str, robots: int, seconds: float, to_reader, from_reader) -> None:
    """The world host: a new representation per robot at 30 Hz, then its descriptor."""
    writers = [
        MooncakeWriter(cfg, 'v1', SHAPE, robot=f'robot{i}', capacity=8) for i in range(robots)
    ]
    if design == 'push':
        te, _ = _engine(WORLD_HOST, cfg)
        src = np.empty(NBYTES, np.uint8)
        te.register_memory(src.ctypes.data, src.nbytes)
        ring_segment, ring_address = from_reader.get()  # the robot host's advertised ring
    rng = np.random.default_rng(0)
    frame, t_end = 0, time.monotonic() + seconds
    next_t = time.monotonic()
    while time.monotonic() < t_end:
        for r, w in enumerate(writers):
            array = rng.standard_normal(SHAPE).astype(np.float32)
            data = array.view(np.uint8).reshape(-1)
            crc = zlib.crc32(data) & 0xFFFFFFFF
            if design == 'push':
                src[:] = data
                slot = (r * RING + frame % RING) * NBYTES
                t0 = time.perf_counter()
                rc = te.transfer_sync_write(
                    ring_segment, src.ctypes.data, ring_address + slot, NBYTES
                )
                write_ms = (time.perf_counter() - t0) * 1e3
                to_reader.put(('push', r, slot, crc, write_ms if rc == 0 else None))
                continue
            entry = w.put(f'f{frame}', time.time_ns(), array)
            name = w.object_of(entry)
            if design == 'read':
                replica = w._store.get_replica_desc(name)[0].get_memory_descriptor()
                where = replica.buffer_descriptor
                to_reader.put(
                    ('read', r, (where.transport_endpoint, where.buffer_address), crc, None)
                )
            else:
                to_reader.put(('store', r, name, crc, None))
        frame += 1
        next_t += 1.0 / CAMERA_HZ
        time.sleep(max(0.0, next_t - time.monotonic()))
    to_reader.put(None)
    from_reader.get()  # the reader is done: the objects may go
    for w in writers:
        w.close()


def _robot(cfg, design: str, robots: int, to_reader, from_reader, results) -> None:
    """The robot host: receive each representation, check it, time it."""
    buf = np.empty(NBYTES + 4096, np.uint8)
    if design == 'store':
        store = _connect(cfg, ROBOT_HOST, 0)
        store.register_buffer(buf.ctypes.data, buf.nbytes)
    else:
        te, segment = _engine(ROBOT_HOST, cfg)
        if design == 'push':
            ring = np.zeros(robots * RING * NBYTES, np.uint8)
            te.register_memory(ring.ctypes.data, ring.nbytes)
            from_reader.put((segment, ring.ctypes.data))
        else:
            te.register_memory(buf.ctypes.data, buf.nbytes)
    latency, refused = [], 0
    while (msg := to_reader.get()) is not None:
        _, r, where, crc, write_ms = msg
        t0 = time.perf_counter()
        if design == 'store':
            ok = store.get_into(where, buf.ctypes.data, buf.nbytes) == NBYTES
            data = buf[:NBYTES]
        elif design == 'read':
            endpoint, address = where
            ok = te.transfer_sync_read(endpoint, buf.ctypes.data, address, NBYTES) == 0
            data = buf[:NBYTES]
        else:
            ok = write_ms is not None
            data = ring[where : where + NBYTES]
        ok = ok and zlib.crc32(data) & 0xFFFFFFFF == crc
        if not ok:
            refused += 1
            continue
        latency.append((time.perf_counter() - t0) * 1e3 + (write_ms or 0.0))
    from_reader.put('done')
    results.put((latency, refused))


def _busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def measure(design: str, load: str, robots: int, seconds: float) -> dict:
    master = MooncakeMaster(WORLD_HOST, free_port(WORLD_HOST), free_port(WORLD_HOST)).start()
    busy = []
    try:
        master.wait_ready(20)
        cfg = master.client_config(
            WORLD_HOST, ROBOT_HOST, global_segment_mb=64, local_buffer_mb=16
        )
        ctx = mp.get_context('spawn')
        to_reader, from_reader, results = ctx.Queue(), ctx.Queue(), ctx.Queue()
        robot = ctx.Process(
            target=_robot, args=(cfg, design, robots, to_reader, from_reader, results)
        )
        robot.start()
        if load == 'cpu':
            busy = [ctx.Process(target=_busy, args=(seconds + 30,)) for _ in range(2)]
            for b in busy:
                b.start()
        world = ctx.Process(
            target=_world, args=(cfg, design, robots, seconds, to_reader, from_reader)
        )
        world.start()
        latency, refused = results.get(timeout=seconds + 60)
        world.join(20)
        robot.join(20)
    finally:
        for b in busy:
            b.terminate()
        master.stop()
    a = np.asarray(latency)
    if a.size == 0:
        raise RuntimeError(f'{design}: nothing received ({refused} refused)')
    return {
        'received': len(a),
        'refused': refused,
        **{f'p{q}': round(float(np.percentile(a, q)), 3) for q in (50, 90, 99)},
        'max': round(float(a.max()), 3),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--robots', type=int, default=4)
    ap.add_argument('--seconds', type=float, default=12.0)
    ap.add_argument('--loads', default='none,cpu')
    ap.add_argument('--designs', default='store,read,push')
    args = ap.parse_args(argv)
    out: dict = {'robots': args.robots, 'seconds': args.seconds, 'shape': list(SHAPE)}
    for load in args.loads.split(','):
        out[load] = {}
        for design in args.designs.split(','):
            print(f'[mooncake_read] {design}, load {load}: {args.robots} robots x 30 Hz, '
                  f'{args.seconds:.0f} s', flush=True)  # fmt: skip
            r = out[load][design] = measure(design, load, args.robots, args.seconds)
            base = out[load].get('store')
            ratio = (
                f', p99 {r["p99"] / base["p99"]:.2f}x the store'
                if base and design != 'store'
                else ''
            )
            print(
                f'[mooncake_read] {design:5s} {load:4s}: {r["received"]} received, '
                f'{r["refused"]} refused, p50 / p90 / p99 / max {r["p50"]:.2f} / {r["p90"]:.2f} '
                f'/ {r["p99"]:.2f} / {r["max"]:.2f} ms{ratio}',
                flush=True,
            )
    print(f'wrote {update_report("mooncake_read", out)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
