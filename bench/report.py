"""bench/report.json: each benchmark writes its own section and keeps the others."""

import json
import os

REPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'report.json')


def _read() -> dict:
    if os.path.exists(REPORT):
        try:
            with open(REPORT) as fh:
                return json.load(fh)
        except ValueError:
            pass
    return {}


def _write(report: dict) -> str:
    with open(REPORT, 'w') as fh:
        json.dump(report, fh, indent=2)
    return REPORT


def update_report(section: str, data: dict) -> str:
    report = _read()
    report[section] = data
    return _write(report)


def update_report_part(section: str, part: str, data) -> str:
    """Write report[section][part], keeping the section's other parts (e.g. reliability.soak)."""
    report = _read()
    report.setdefault(section, {})[part] = data
    return _write(report)
