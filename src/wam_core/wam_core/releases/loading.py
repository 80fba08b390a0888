"""Loading a release's model beside the one that serves: on a background thread, with the
process's memory watched while it loads.

An expert node starts a :class:`BackgroundLoad` when the release manager asks it to load
a release; the executor and the tick keep running meanwhile (the load is torch and file
reads, which release the GIL for most of their time). The node polls ``state``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

LOADING, LOADED, FAILED = 'loading', 'loaded', 'failed'
_PAGE = os.sysconf('SC_PAGE_SIZE') if hasattr(os, 'sysconf') else 4096


def rss_mb() -> float:
    """This process's resident memory, MB (0.0 where /proc is not there)."""
    try:
        with open('/proc/self/statm', encoding='ascii') as fh:
            return int(fh.read().split()[1]) * _PAGE / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def paced(n: int, one: Callable[[], object], duty: float = 0.5) -> list:
    """``one()`` n times, idle after each for as long as it took x (1/duty - 1): a warm-up
    beside a serving model takes at most ``duty`` of a core. Returns the results."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        out.append(one())
        time.sleep((time.perf_counter() - t0) * (1.0 / duty - 1.0))
    return out


class BackgroundLoad:
    """``load()`` on its own thread; ``state`` is loading, then loaded (``result``) or
    failed (``error``, the reason). The peak resident memory while it ran is sampled."""

    def __init__(self, release: str, load: Callable[[], object], sample_s: float = 0.05):
        self.release = release
        self.state = LOADING
        self.result = None
        self.error = ''
        self.started = time.monotonic()
        self.seconds = 0.0
        self.rss_before_mb = rss_mb()
        self.peak_rss_mb = self.rss_before_mb
        self._load = load
        self._sample_s = sample_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f'load_{release}', daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sampler = threading.Thread(target=self._sample, name='load_rss', daemon=True)
        sampler.start()
        try:
            self.result = self._load()
            self.state = LOADED
        except Exception as exc:  # the reason goes back to the manager: nothing is served
            self.error = f'{type(exc).__name__}: {exc}'
            self.state = FAILED
        finally:
            self.seconds = time.monotonic() - self.started
            self._done.set()
            sampler.join()
            self.peak_rss_mb = max(self.peak_rss_mb, rss_mb())

    def _sample(self) -> None:
        while not self._done.wait(self._sample_s):
            self.peak_rss_mb = max(self.peak_rss_mb, rss_mb())

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)


def start_load(
    loads: dict[str, BackgroundLoad],
    request,
    load: Callable[[str, str], object],
    log: Callable[[str], None],
) -> tuple[bool, str]:
    """The load phase of a switch_release request, the same for every expert node: start
    ``load(model_dir, manifest_sha256)`` for the request's release unless a load of it is
    under way or done (``loads`` is the node's, by release). Returns (accepted, message)."""
    from ..common.paths import resolve_path

    name = request.release
    current = loads.get(name)
    if current is not None and current.state != FAILED:
        return True, f'{name} is {current.state}'
    if not request.model_dir:
        return False, 'load needs model_dir'
    model_dir, digest = resolve_path(request.model_dir), request.manifest_sha256
    loads[name] = BackgroundLoad(name, lambda: load(model_dir, digest))
    log(f'release {name}: loading {model_dir}')
    return True, f'loading {name}'
