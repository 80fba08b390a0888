#!/usr/bin/env python3
"""bench/report.json (+ the series the runs leave) -> bench/report.md with PNG plots.

    python bench/render_report.py

Plots, when their data is there: the tick-latency histogram and the timer period over
time (bench/series_*.json from `make bench`), and the fault timelines
(bench/faults_timeline.json from `make faults`). Every section of report.json becomes
a table. Called at the end of make bench / eval / faults / soak.
"""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name: str):
    path = os.path.join(HERE, name)
    if not os.path.exists(path):
        return None
    with open(path, encoding='utf-8') as fh:
        return json.load(fh)


def _flatten(d, prefix: str = '') -> list[tuple]:
    rows = []
    for k, v in d.items():
        key = f'{prefix}{k}'
        if isinstance(v, dict):
            rows += _flatten(v, key + '.')
        elif isinstance(v, list) and len(v) > 12:
            rows.append((key, f'[{len(v)} values]'))
        else:
            rows.append(
                (
                    key,
                    f'{v:.4g}'
                    if isinstance(v, float)
                    else json.dumps(v)
                    if isinstance(v, list)
                    else v,
                )
            )
    return rows


def plot_latency(series: dict, out_dir: str) -> list[str]:
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import numpy as np

    made = []
    ticks = {m: s['tick_ms'] for m, s in series.items() if s.get('tick_ms')}
    if ticks:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for mode, v in ticks.items():
            ax.hist(v, bins=80, alpha=0.6, label=f'{mode}-process (n={len(v)})')
        ax.axvline(12.0, color='r', ls='--', lw=1, label='12 ms budget')
        ax.set_xlabel('tick latency (ms)')
        ax.set_ylabel('ticks')
        ax.set_yscale('log')
        ax.legend()
        ax.set_title('action-expert tick latency')
        fig.tight_layout()
        path = os.path.join(out_dir, 'tick_latency.png')
        fig.savefig(path, dpi=100)
        plt.close(fig)
        made.append(path)
    periods = {m: s['period_ms'] for m, s in series.items() if s.get('period_ms')}
    if periods:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for mode, v in periods.items():
            t = np.cumsum(v) / 1e3
            ax.plot(t, v, lw=0.5, label=f'{mode}-process')
        ax.axhline(20.0, color='k', lw=0.8)
        ax.set_xlabel('time (s)')
        ax.set_ylabel('period (ms)')
        ax.set_title('50 Hz timer period over time (chunk arrivals at a subscriber)')
        ax.legend()
        fig.tight_layout()
        path = os.path.join(out_dir, 'timer_period.png')
        fig.savefig(path, dpi=100)
        plt.close(fig)
        made.append(path)
    return made


def plot_faults(timeline: dict, out_dir: str) -> list[str]:
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    # one row per fault: its first run (make faults REPEAT=N runs each N times)
    first = {}
    for f in timeline.get('faults', []):
        if f.get('timeline'):
            first.setdefault(f['fault'], f)
    faults = list(first.values())
    if not faults:
        return []
    fig, axes = plt.subplots(len(faults), 1, figsize=(8, 1.2 * len(faults) + 1), squeeze=False)
    for ax, f in zip(axes[:, 0], faults, strict=True):
        pts = f['timeline']
        for kind, color, label in (
            (1, 'tab:green', 'chunk'),
            (0, 'tab:orange', 'hold'),
            (2, 'tab:red', 'stop'),
        ):
            xs = [t for t, k in pts if k == kind]
            ax.scatter(xs, [kind] * len(xs), s=4, c=color, label=label)
        ax.axvline(0.0, color='k', lw=1)
        clear = f.get('clear_s')
        if clear:  # a kill's restart takes seconds: each row spans its own fault
            ax.axvline(clear, color='tab:blue', lw=1, ls='--', label='cleared')
        ax.set_xlim(
            -0.5, max(2.5, (clear or 0.0) + 1.5, max((t for t, _ in pts), default=0.0) + 0.1)
        )
        ax.set_ylim(-0.5, 2.5)
        ax.set_yticks([])
        ax.set_ylabel(f['fault'], rotation=0, ha='right', va='center', fontsize=8)
        ax.tick_params(labelsize=7)
        hold = f.get('hold_ms')
        rec = f.get('recovery_s')
        ax.set_title(
            f'hold {"-" if hold is None else f"{hold:.0f} ms"}, recovery '
            f'{"-" if rec is None else f"{rec:.2f} s"}'
            + (f'; {f["notes"]}' if f.get('notes') else ''),
            fontsize=7,
            loc='left',
        )
    axes[0, 0].legend(loc='upper right', fontsize=7, ncol=4)
    axes[-1, 0].set_xlabel(
        'seconds from the fault (what the robot received; dashed: the fault cleared)'
    )
    fig.suptitle('fault timelines')
    fig.tight_layout()
    path = os.path.join(out_dir, 'fault_timelines.png')
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return [path]


def render(out_dir: str = HERE) -> str:
    report = _load('report.json') or {}
    lines = [
        '# Mooncake-SG benchmark report',
        '',
        'Written by `bench/render_report.py` from `bench/report.json`; figures from this machine.',
        '',
    ]
    images = []
    series = {}
    for mode in ('multi', 'single'):
        s = _load(f'series_{mode}.json')
        if s:
            series[mode] = s
    if series:
        images += plot_latency(series, out_dir)
    timeline = _load('faults_timeline.json')
    if timeline:
        images += plot_faults(timeline, out_dir)
    for img in images:
        lines += [f'![{os.path.basename(img)}]({os.path.basename(img)})', '']
    for section, data in report.items():
        lines += [f'## {section}', '', '| key | value |', '|---|---|']
        lines += [f'| {k} | {v} |' for k, v in _flatten(data)]
        lines.append('')
    path = os.path.join(out_dir, 'report.md')
    with open(path, 'w', encoding='utf-8') as fh:
        fh.write('\n'.join(lines))
    return path


if __name__ == '__main__':
    print(f'wrote {render()}')
    sys.exit(0)
