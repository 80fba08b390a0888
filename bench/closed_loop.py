#!/usr/bin/env python3
"""Closed-loop benchmark on the MuJoCo simulator -> "closed_loop" in bench/report.json.

Runs the multi-process stack on the simulated robot (physics, rendering and the
robot's topics in this process) for --seconds and reads the action expert's
/diagnostics: obs_to_action (camera frame stamp -> first chunk computed from that
frame's representation), tick and timer period under simulation load. Then the
scripted IK expert's success rate over --episodes seeded episodes.
"""

from __future__ import annotations

import argparse
import sys

from robot_agent.stack import Stack
from wam_core.common.paths import default_config
from wam_sim.scripted_expert import run_episode
from wam_sim.tabletop import TabletopSim
from wam_system_tests.report import update_report


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--seconds', type=float, default=30.0)
    ap.add_argument('--episodes', type=int, default=100)
    ap.add_argument('--mode', default='multi')
    args = ap.parse_args()

    print(f'{args.mode}-process stack on the simulator for {args.seconds:.0f} s ...', flush=True)
    stack = Stack(args.mode, default_config(), robot='sim', seed=0)
    try:
        stack.wait_ready(120)
        stack.spin_for(args.seconds)
        stack.spin_for(1.2)
        s = stack.stats()
    finally:
        stack.shutdown()
    print(f'scripted expert over {args.episodes} episodes ...', flush=True)
    sim = TabletopSim(render=False)
    ok = sum(run_episode(sim, 1000 + i)[0] for i in range(args.episodes))
    out = {
        'obs_to_action_ms': {'p50': s['obs_to_action_p50'], 'p99': s['obs_to_action_p99']},
        'tick_ms_under_sim': {'p50': s['tick_p50'], 'p99': s['tick_p99']},
        'period_ms_under_sim': {'p99': s['period_p99'], 'max': s['period_max']},
        'scripted_expert_success': ok / args.episodes,
        'degraded_ticks': s['degraded_ticks'],
        'ticks': s['ticks'],
        'mode': args.mode,
        'seconds': args.seconds,
        'episodes': args.episodes,
    }
    path = update_report('closed_loop', out)
    print()
    print(
        f'{"obs -> action ms p50 / p99":32}{s["obs_to_action_p50"]:8.2f} / '
        f'{s["obs_to_action_p99"]:.2f}'
    )
    print(f'{"tick ms under sim p50 / p99":32}{s["tick_p50"]:8.2f} / {s["tick_p99"]:.2f}')
    print(f'{"period ms under sim p99 / max":32}{s["period_p99"]:8.2f} / {s["period_max"]:.2f}')
    print(f'{"degraded ticks / ticks":32}{s["degraded_ticks"]:8.0f} / {s["ticks"]:.0f}')
    print(f'{"scripted expert success":32}{ok:8d} / {args.episodes}')
    print(f'\nwrote {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
