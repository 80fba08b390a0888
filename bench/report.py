"""bench/report.json: each benchmark writes its own section and keeps the others."""
import json
import os

REPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'report.json')


def update_report(section: str, data: dict) -> str:
    report = {}
    if os.path.exists(REPORT):
        try:
            with open(REPORT) as fh:
                report = json.load(fh)
        except ValueError:
            report = {}
    report[section] = data
    with open(REPORT, 'w') as fh:
        json.dump(report, fh, indent=2)
    return REPORT
