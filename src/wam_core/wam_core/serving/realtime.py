"""Real-time scheduling for the threads on the hot path.

Two threads decide whether a robot acts on a fresh observation: the action expert's tick
(SCHED_FIFO 50, as ros2_control's controller manager runs its update loop) and the world
expert's encoder, whose camera stamp -> descriptor latency is what the readers' TTL is
spent on. At normal priority the encoder shares the cores with the simulator, the gates
and every node's callbacks, and on this 2-core machine its encode took 2-3 times as long
as on an idle core. Ranked between the tick and everything else, it gets a core when a
frame is waiting and yields it to the tick (``realtime_priority`` 40 against the tick's
50; docs/benchmarks.md, "The demo").
"""

from __future__ import annotations

import os


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
