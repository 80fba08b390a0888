"""CPython settings for a process that runs a 50 Hz loop beside other threads.

Two interpreter defaults delay the tick thread, measured on this machine (2 cores, the
multi-process stack with two camera views; ``python bench/hot_path.py``):

- The GIL switch interval. A thread that wakes at its deadline and finds the GIL held
  waits a whole switch interval before it may ask for it (5 ms by default). At 0.5 ms the
  tick's wake-up p99 was 0.55-1.03 ms and its period p99 20.45-20.94 ms; at 0.1 ms
  0.38-0.40 ms and 20.29-20.32 ms (three 30 s runs each). The cost is only paid while two
  threads want the GIL, and then as a few more hand-offs per millisecond.
- The cyclic garbage collector. A full (generation 2) collection walks every tracked
  object, and a process holding torch, transformers and a model has several hundred
  thousand of them: one collection held the GIL for 258 ms in a 30 s single-process run,
  the tick waited 247 ms for it, and the fuzz tests' stalls of ~0.5 s that let a late
  chunk through were of this kind. Everything that exists once start-up and warm-up are
  done lives as long as the process, so ``freeze_heap`` moves it to the permanent
  generation (``gc.freeze``): later collections walk only what the steady state
  allocates. With it the same run's longest wake-up was 2.6 ms. Objects created after the
  freeze are still collected.
"""

from __future__ import annotations

import gc
import sys

GIL_SWITCH_INTERVAL_S = 1e-4
# A process that holds every node (robot_agent.stack's single mode, the fleet's
# in-process runs) shares the GIL with the encoder thread too. There the 0.1 ms figures
# were mixed (period p99 20.38-21.40 ms against 20.55-21.42 at 0.5 ms), and a fresh-clone
# make test with 0.1 ms failed four rate-bound stack tests (98-147 chunks in 4 s where
# 150 are asked; the machine was also slower then: the old settings gave 108-174 in
# probes right after). Not shown to help there, so such a process keeps 0.5 ms.
SHARED_PROCESS_SWITCH_INTERVAL_S = 5e-4


def shorten_gil_switch_interval(interval_s: float = GIL_SWITCH_INTERVAL_S) -> None:
    """For the whole process: a waking tick gets the GIL within about ``interval_s``."""
    sys.setswitchinterval(interval_s)


def thaw_heap() -> None:
    """Undo ``freeze_heap`` (a process that tears its nodes down and goes on): frozen
    objects become collectable again, cycles among them included."""
    gc.unfreeze()


def freeze_heap() -> int:
    """Collect once, then keep every object alive now out of later collections (call it
    when start-up and warm-up are done; again after more start-up work is cheap: frozen
    objects are not walked). Returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
