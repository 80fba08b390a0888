"""bench/gpu.py's CPU dry run: the device check's script works before device time is spent."""

import os
import subprocess
import sys

from wam_core.common.paths import workspace_root


def test_the_gpu_bench_runs_on_the_cpu_and_names_what_it_cannot_measure():
    script = os.path.join(workspace_root(), 'bench', 'gpu.py')
    out = subprocess.run(
        [sys.executable, script, '--device', 'cpu', '--quick', '--iters', '3', '--no-report'],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    for b in ('b1', 'b4', 'b8'):
        assert f'encode default  {b:>3}: p50 ' in text, text
    assert 'action tick eager  : p50 ' in text
    assert 'read shm' in text and 'error' not in text
    assert 'x the split tick' in text
    # no GPU figure is made up on the CPU: what needs CUDA is named absent, with the reason
    assert 'action_tick_ms.graphs: absent (no CUDA device' in text
    assert 'ipc_read_ms.cuda_ipc: absent (no CUDA device' in text
    assert 'peak_mem_fraction: absent' in text
