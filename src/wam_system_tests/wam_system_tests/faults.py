"""`make faults`: inject faults into the multi-process stack on the simulator and measure.

    python -m wam_system_tests.faults [--only world_kill,camera_stall] [--repeat N]
                                      [--json out.json]

The drills are in three modules, none of which imports this one:
- ``fault_recorder``: what every drill shares: the targets, a fault's result and the
  recorder on the robot's /arm_controller/joint_trajectory that measures it (hold, brake,
  unsafe, stale, conformance, recovery);
- ``lone_faults``: the lone robot's faults on the multi-process stack (``FAULTS``);
- ``fleet_faults``: the fleet's faults on two robots and the Mooncake Store, and
  instance_kill (``FLEET_FAULTS``).
This module runs both and reports them (bench/report.json, bench/faults_timeline.json).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict

from wam_core.common.paths import workspace_root

from .fault_recorder import FaultResult, _line, summarise
from .fleet_faults import FLEET_FAULTS, run_fleet
from .lone_faults import FAULTS, run_lone
from .report import read_report, record_conformance, update_report_part


def run(
    faults: list[str],
    seed: int = 5000,
    progress: bool = True,
    shm_name: str = '',
    repeat: int = 1,
) -> dict[str, object]:
    """The lone robot's faults on the multi-process stack on the simulator, then the
    fleet's (``fleet_faults``) on a fleet of two robots; one result for both."""
    lone = [f for f in faults if f in FAULTS]
    fleet = [f for f in faults if f in FLEET_FAULTS]
    out = run_lone(lone, seed, progress, shm_name, repeat) if lone else _empty()
    if fleet:

        def show(i, r):
            if progress:
                print(f'{f"[{i + 1}/{repeat}] " if repeat > 1 else ""}{_line(r)}', flush=True)

        f = run_fleet(fleet, repeat, progress=show)
        results = [FaultResult(**r) for r in out['faults']] + f['results']
        out.update(
            faults=[asdict(r) for r in results],
            summary=summarise(results),
            conformance_checked=out['conformance_checked'] + f['conformance_checked'],
            conformance_violations=out['conformance_violations'] + f['conformance_violations'],
            conformance_examples=out['conformance_examples'] + f['conformance_examples'],
            leaked_segments=out['leaked_segments'] + f['leaked_segments'],
            leaked_processes=out['leaked_processes'] + f['leaked_processes'],
        )
        out['all_ok'] = (
            all(r.ok for r in results)
            and not out['leaked_segments']
            and not out['leaked_processes']
        )
    return out


def _empty() -> dict[str, object]:
    return {
        'faults': [],
        'summary': {},
        'conformance_checked': 0,
        'conformance_violations': 0,
        'conformance_examples': [],
        'leaked_segments': [],
        'leaked_processes': [],
        'all_ok': True,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--only', default=','.join([*FAULTS, *FLEET_FAULTS]))
    ap.add_argument('--repeat', type=int, default=1, help='run every fault this many times')
    ap.add_argument('--json', default='')
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(',') if n.strip()]
    unknown = [n for n in names if n not in FAULTS and n not in FLEET_FAULTS]
    if unknown:
        ap.error(f'unknown faults {unknown}; known: {", ".join([*FAULTS, *FLEET_FAULTS])}')
    if args.repeat < 1:
        ap.error('--repeat must be at least 1')
    out = run(names, repeat=args.repeat)
    leaks = len(out['leaked_segments']) + len(out['leaked_processes'])
    summary = out['summary']
    for figures in summary.values():
        figures['leaks'] = leaks
    # each fault's figures are from its latest run: --only reruns keep the others'
    previous = read_report().get('reliability', {}).get('faults', {})
    kept = {k: v for k, v in previous.items() if k not in summary and 'runs' in v}
    update_report_part('reliability', 'faults', {**kept, **summary})
    record_conformance('faults', out['conformance_checked'], out['conformance_violations'])
    timeline = os.path.join(workspace_root(), 'bench', 'faults_timeline.json')
    with open(timeline, 'w', encoding='utf-8') as fh:
        json.dump(out, fh)
    if args.json:
        with open(args.json, 'w', encoding='utf-8') as fh:
            json.dump(out, fh, indent=1)
    print()
    print(
        f'{"fault":18}{"runs":>5}{"stale":>6}{"unsafe":>7}{"hold p50/p99 ms":>18}'
        f'{"brake p99 ms":>13}{"recovery p50/p99 s":>20}{"missed":>7}'
    )

    def fmt(v, n=1):
        return '-' if v is None else f'{v:.{n}f}'

    for name, f in summary.items():
        print(
            f'{name:18}{f["runs"]:>5}{f["stale_forwarded"]:>6}{f["unsafe_forwarded"]:>7}'
            f'{fmt(f["hold_ms_p50"]) + " / " + fmt(f["hold_ms_p99"]):>18}'
            f'{fmt(f["brake_ms_p99"]):>13}'
            f'{fmt(f["recovery_s_p50"], 2) + " / " + fmt(f["recovery_s_p99"], 2):>20}'
            f'{f["runs_missed"]:>7}'
        )
    print(
        f'conformance: {out["conformance_violations"]} violations in '
        f'{out["conformance_checked"]} forwarded trajectories {out["conformance_examples"][:2]}'
    )
    print(f'leaked segments {out["leaked_segments"]} processes {out["leaked_processes"]}')
    print(
        'all faults handled within targets'
        if out['all_ok']
        else 'SOME FAULTS MISSED THEIR TARGETS'
    )
    return 0 if out['all_ok'] else 1


if __name__ == '__main__':
    sys.exit(main())
