"""bench/report.json: each benchmark and drill writes its own section and keeps the others."""

from __future__ import annotations

import json
import os

from wam_core.common.paths import workspace_root


def report_path() -> str:
    """bench/report.json in the workspace ($WAM_ROOT)."""
    return os.path.join(workspace_root(), 'bench', 'report.json')


def read_report() -> dict:
    path = report_path()
    if os.path.exists(path):
        try:
            with open(path, encoding='utf-8') as fh:
                return json.load(fh)
        except ValueError:
            pass
    return {}


def _write(report: dict) -> str:
    path = report_path()
    with open(path, 'w', encoding='utf-8') as fh:
        json.dump(report, fh, indent=2)
    return path


def update_report(section: str, data: dict) -> str:
    report = read_report()
    report[section] = data
    return _write(report)


def update_report_part(section: str, part: str, data) -> str:
    """Write report[section][part], keeping the section's other parts (e.g. reliability.soak)."""
    report = read_report()
    report.setdefault(section, {})[part] = data
    return _write(report)


def record_conformance(run: str, checked: int, violations: int) -> str:
    """reliability.conformance.<run> = {checked, violations} for one drill or benchmark
    (eval, faults, fuzz, soak), and reliability.conformance_violations = their sum: every
    trajectory those runs saw reach /arm_controller/joint_trajectory, held against
    joint_trajectory_controller's acceptance rules."""
    report = read_report()
    rel = report.setdefault('reliability', {})
    runs = rel.setdefault('conformance', {})
    runs[run] = {'checked': int(checked), 'violations': int(violations)}
    rel['conformance_violations'] = sum(r['violations'] for r in runs.values())
    return _write(report)
