"""`make soak`: the full multi-process stack on the simulator for a long time; does anything grow?

    python -m wam_system_tests.soak [--minutes 10]

Episodes run back to back (a new seeded scene and an ExecuteTask goal every
``--episode-s``). Every few seconds it samples the RSS and open file descriptors of
every stack process and the shared-memory segments (ours and Fast DDS's); the action
expert's tick p99 is read from its typed status at the end of the first and of the last
minute (its window holds the last ~minute of ticks). Reports growth from the end of the
first minute (after warm-up allocations) to the end.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

from rclpy.action import ActionClient

from robot_agent.stack import Stack
from wam_core.common.paths import default_config
from wam_interfaces.action import ExecuteTask

from .report import record_conformance, update_report_part

RSS_GROWTH_TARGET_PCT = 5.0
P99_DRIFT_TARGET = 1.2


def sample(procs: dict[str, int]) -> dict[str, object]:
    """RSS (MB) per process and in total, open file descriptors, our and Fast DDS's segments."""
    import psutil

    rss, fds = {}, 0
    for name, pid in procs.items():
        try:
            p = psutil.Process(pid)
            rss[name] = p.memory_info().rss / 2**20
            fds += p.num_fds()
        except psutil.Error:
            rss[name] = float('nan')
    return {
        't': time.monotonic(),
        'rss_mb': sum(rss.values()),
        'rss_by_process_mb': rss,
        'fds': fds,
        'segments': len(glob.glob('/dev/shm/wam*') + glob.glob('/dev/shm/fastdds_*')),
    }


def _safety(stack) -> dict[str, float]:
    """Safety stops and chunk-gap holds so far, from the gate's latest typed status."""
    gate = stack.monitor.gate
    nan = float('nan')
    return {
        'safety_stops': gate.safety_stops if gate is not None else nan,
        'gap_holds': gate.gap_holds if gate is not None else nan,
    }


def run(minutes: float, episode_s: float = 15.0, progress: bool = True) -> dict[str, object]:
    stack = Stack('multi', default_config(), robot='sim', seed=9000)
    samples: list[dict[str, float]] = []
    first_minute = None
    episodes = successes = 0
    try:
        stack.wait_ready(120)
        pids = dict(
            {'robot+monitor': os.getpid()}, **{role: p.pid for role, p in stack.children.items()}
        )
        client = ActionClient(stack.monitor, ExecuteTask, '/harness/execute_task')
        client.wait_for_server(timeout_sec=10.0)
        t0 = time.monotonic()
        end = t0 + minutes * 60.0
        handle = None
        while time.monotonic() < end:
            if handle is not None:
                successes += int(stack.robot.sim.success())
                stack.spin_for(2.0, until=handle.cancel_goal_async().done)
            stack.robot.sim.reset(9000 + episodes)
            episodes += 1
            fut = client.send_goal_async(
                ExecuteTask.Goal(instruction='put the red apple in the fridge')
            )
            stack.spin_for(5.0, until=fut.done)
            handle = fut.result() if fut.done() and fut.result().accepted else None
            ep_end = min(time.monotonic() + episode_s, end)
            while time.monotonic() < ep_end:
                stack.spin_for(min(5.0, ep_end - time.monotonic()))
                samples.append(sample(pids))
                if first_minute is None and time.monotonic() - t0 >= 60.0:
                    first_minute = dict(stack.stats(), **_safety(stack), **samples[-1])
                if progress:
                    s = samples[-1]
                    print(
                        f'\rsoak {time.monotonic() - t0:6.0f}/{minutes * 60:.0f} s | '
                        f'episodes {episodes} '
                        f'| RSS {s["rss_mb"]:.0f} MB | fds {s["fds"]} | segments {s["segments"]}',
                        end='',
                        file=sys.stderr,
                        flush=True,
                    )
        stack.spin_for(1.2)
        last = dict(stack.stats(), **_safety(stack), **sample(pids))
    finally:
        stack.shutdown()
    if progress:
        print(file=sys.stderr)
    first = first_minute or (dict(samples[0]) if samples else last)
    growth = 100.0 * (last['rss_mb'] - first['rss_mb']) / max(first['rss_mb'], 1e-9)
    out = {
        'minutes': minutes,
        'episodes': episodes,
        'successes': successes,
        'rss_mb_start': round(first['rss_mb'], 1),
        'rss_mb_end': round(last['rss_mb'], 1),
        'rss_growth_pct': round(growth, 2),
        'fds_start': first['fds'],
        'fds_end': last['fds'],
        'segments_start': first['segments'],
        'segments_end': last['segments'],
        'tick_p99_first_ms': first.get('tick_p99'),
        'tick_p99_last_ms': last.get('tick_p99'),
        'period_p99_first_ms': first.get('period_p99'),
        'period_p99_last_ms': last.get('period_p99'),
        'rss_growth_pct_by_process': {
            k: round(100.0 * (v - f) / max(f, 1e-9), 2)
            for k, v in last['rss_by_process_mb'].items()
            if (f := first['rss_by_process_mb'].get(k)) is not None
        },
        'rss_by_process_mb_start': {k: round(v, 1) for k, v in first['rss_by_process_mb'].items()},
        'rss_by_process_mb_end': {k: round(v, 1) for k, v in last['rss_by_process_mb'].items()},
        'degraded_ticks': last.get('degraded_ticks'),
        'ticks_open_loop': last.get('open_loop_ticks'),
        'ticks_held': last.get('held_ticks'),
        'conformance_checked': stack.monitor.conformance.checked,
        'conformance_violations': stack.monitor.conformance.total,
        'ticks': last.get('ticks'),
        'safety_stops': last.get('safety_stops'),
        'gap_holds': last.get('gap_holds'),
        'rss_series_mb': [round(s['rss_mb'], 1) for s in samples],
    }
    p1, p2 = out['tick_p99_first_ms'], out['tick_p99_last_ms']
    out['ok'] = bool(
        growth < RSS_GROWTH_TARGET_PCT
        and last['fds'] <= first['fds'] + 2
        and last['segments'] <= first['segments']
        and p1
        and p2
        and p2 <= P99_DRIFT_TARGET * p1
        and out['conformance_violations'] == 0
    )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--minutes', type=float, default=10.0)
    ap.add_argument('--episode-s', type=float, default=15.0)
    args = ap.parse_args(argv)
    if args.minutes < 2:
        ap.error('--minutes must be at least 2 (first and last minute are compared)')
    out = run(args.minutes, args.episode_s)
    update_report_part(
        'reliability', 'soak', {k: v for k, v in out.items() if k != 'rss_series_mb'}
    )
    record_conformance('soak', out['conformance_checked'], out['conformance_violations'])
    for k in (
        'minutes',
        'episodes',
        'successes',
        'rss_mb_start',
        'rss_mb_end',
        'rss_growth_pct',
        'fds_start',
        'fds_end',
        'segments_start',
        'segments_end',
        'tick_p99_first_ms',
        'tick_p99_last_ms',
        'period_p99_first_ms',
        'period_p99_last_ms',
        'rss_by_process_mb_start',
        'rss_by_process_mb_end',
        'degraded_ticks',
        'ticks_open_loop',
        'ticks_held',
        'conformance_violations',
        'ticks',
        'safety_stops',
        'gap_holds',
    ):
        print(f'{k:26}{out[k]}')
    print('no growth, no drift' if out['ok'] else 'GROWTH OR DRIFT: see above')
    return 0 if out['ok'] else 1


if __name__ == '__main__':
    sys.exit(main())
