#!/usr/bin/env python3
"""The conformance kit on the shipped expert pair -> the "models" section of bench/report.json.

    python bench/models.py [--world models/world_expert] [--action models/action_expert]

Runs every check of ``python -m wam_core.models.check`` (manifest, contract, joints,
period, outputs, determinism, cached context, latency against the configured
budgets), prints its table and records each check as {passed, figure, reason}.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

from wam_core.common.paths import workspace_root
from wam_core.models import check
from wam_system_tests.report import update_report


def main() -> int:
    root = workspace_root()
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--world', default=os.path.join(root, 'models', 'world_expert'))
    ap.add_argument('--action', default=os.path.join(root, 'models', 'action_expert'))
    args = ap.parse_args()
    torch.set_num_threads(1)  # as the nodes run
    checks = check.check_dirs(args.world, args.action)
    print(check.table(checks))
    section = {
        'world_dir': os.path.relpath(args.world, root),
        'action_dir': os.path.relpath(args.action, root),
        'conformance': {
            c.name: {'passed': c.passed, 'figure': c.figure, 'reason': c.reason} for c in checks
        },
        'passed': all(c.passed for c in checks),
    }
    print(f'\nwrote {update_report("models", section)}')
    return 0 if section['passed'] else 1


if __name__ == '__main__':
    sys.exit(main())
