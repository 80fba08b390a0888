"""Weights load without transformers' progress bars.

A node's log is line-oriented and read on a screen: a "Loading weights" bar per model was
three lines of the demo's log (of the 40 a nominal run may have), for loads that take
milliseconds here. The bars are switched off only around a load and put back after, so a
caller that wants them elsewhere keeps them.
"""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def no_progress_bars():
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars:
            hf_logging.enable_progress_bar()
