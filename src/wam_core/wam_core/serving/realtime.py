"""Scheduling for the threads on the hot path.

Two threads decide whether a robot acts on a fresh observation: the action expert's tick
(SCHED_FIFO 50, as ros2_control's controller manager runs its update loop: a short
periodic task) and the world expert's encoder, whose camera stamp -> descriptor latency
is what the readers' TTL is spent on. At normal priority the encoder shares the cores
with the simulator, the gates and every node's callbacks, and on this 2-core machine its
encode took 2-3 times as long as on an idle core.

The encoder is not short: with a fleet's frames waiting it computes back to back. At
SCHED_FIFO (40, below the tick) it held a core outright; in the 4-robot instance_kill
drill the processes beside it starved, the synthetic robots' cameras slowed, and 63
chunks in 10 runs were judged stale against 0 in 3 without it (2026-12-04). So it gets a
larger share of the CPU instead (``request_nice``: a lower nice value, CFS weight), which
never starves the threads beside it.
"""

from __future__ import annotations

import os
import threading


def request_fifo(priority: int) -> str:
    """Ask SCHED_FIFO at ``priority`` for the calling thread; '' when granted (or when
    ``priority`` is 0: normal scheduling asked), else why not (no CAP_SYS_NICE or rtprio
    limit, or a platform without it): the thread then runs at normal priority."""
    if priority <= 0:
        return ''
    try:  # pid 0: the calling thread
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError) as exc:
        return f'SCHED_FIFO {priority} refused ({exc})'
    return ''


def request_nice(nice: int) -> str:
    """Set the calling thread's nice value (Linux: per thread); '' when set (or when
    ``nice`` is 0: nothing asked), else why not (a negative value needs CAP_SYS_NICE or
    an RLIMIT_NICE allowance): the thread then keeps its nice value."""
    if nice == 0:
        return ''
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except (OSError, AttributeError) as exc:
        return f'nice {nice} refused ({exc})'
    return ''
