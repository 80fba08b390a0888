"""World-expert serving logic: validate an observation, encode it once, cache it.

An observation is one frame per view the world expert declares (one camera, or
several gathered by ``view_sync``), and for a world expert that reads the task's text (a
VLM's prompt: the active subtask) that text too; it is fingerprinted over every view and
the text, so world-expert calls per distinct observation stay exactly 1.00 with any
number of cameras, and a new subtask makes a new representation.

Besides the image itself, two things make a frame unusable:
- its stamp: from the future (a clock jump, a skewed clock) or already older than the
  cache TTL, its representation would be trusted for too long or never be fresh;
- a frozen camera: a driver that repeats the last frame. A static scene repeats frames
  too, and then reusing the representation is right (encode once); so a repeat counts as
  frozen only if the arm moved between the stamps of the picture's first frame and the
  repeat (``frozen_camera``), and a picture once found frozen stays refused.
A rejected frame neither encodes nor refreshes the cache, so the representation ages
past the TTL and the action expert holds. A frozen camera's picture is withdrawn at once
instead (``RETRACTED_STAMP_NS``): the camera is known to repeat it, so the arm would
otherwise act on it for the rest of its TTL (about 70 ms at 30 Hz) after the fact was
known. With the shared-memory and in-process caches the readers refuse it at their next
read; readers across hosts (the Mooncake Store) judge by the descriptor they already
have and let it age out.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ..cache.protocol import CacheEntry, CacheError, now_ns
from ..models.contract import Observation
from .frozen_camera import FrozenCameraCheck
from .image import (
    ImageError,
    fingerprint,
    frame_to_array,
    observation_fingerprint,
    with_prompt,
)
from .latency import StageTimer

# The observation stamp a withdrawn representation is given: older than any TTL, so
# every reader of a local cache refuses it as stale from its next read on.
RETRACTED_STAMP_NS = 0


@dataclass
class EncodeOutcome:
    entry: CacheEntry
    cache_hit: bool
    encode_ms: float


@dataclass
class PendingEncode:
    """A valid frame that is not in the cache: it needs one world-expert call."""

    fp: str
    stamp_ns: int
    views: dict[str, np.ndarray]  # view name -> HxWx3 uint8
    prompt: str = ''  # the task's text, for a world expert whose spec reads it

    @property
    def observation(self) -> Observation:
        """What the world expert encodes."""
        return Observation(self.views, self.stamp_ns, prompt=self.prompt)


class FrameEncoder:
    """Camera frame -> cached representation. A repeated identical frame is a hit."""

    def __init__(
        self,
        expert,
        cache,
        timeout_ms: float = 40.0,
        max_age_ms: float = math.inf,
        max_future_ms: float = 100.0,
        frozen_motion: float = 0.0005,
        clock=now_ns,
    ):
        self.expert = expert
        self.views = expert.spec.view_names  # the first is the primary (its stamp, its topic)
        self.reads_prompt = bool(getattr(expert.spec, 'prompt', False))
        self.cache = cache
        self.timeout_ms = timeout_ms
        self.max_age_ns = max_age_ms * 1e6
        self.max_future_ns = max_future_ms * 1e6
        # rad (max over joints) of arm motion between two stamps that a repeat must not hide
        self.frozen_camera = FrozenCameraCheck(frozen_motion)
        self.clock = clock
        self.frames = 0  # valid frames seen
        self.encodes = 0  # this robot's frames the expert encoded (alone or in a batch)
        self.hits = 0  # identical frames served from the cache
        self.timeouts = 0  # encodes slower than the world timeout
        self.retracted = 0  # representations withdrawn (a frozen camera's)
        self.rejected: dict[str, int] = {}
        # capture_to_queued / capture_to_published: wall clock from the camera's stamp to the
        # observation complete and waiting to be encoded / to its descriptor sent (the node
        # adds them): together with the camera period, what the readers' TTL is spent on
        self.timer = StageTimer(
            'validate', 'encode', 'cache_write', 'capture_to_queued', 'capture_to_published'
        )

    def use(self, expert) -> None:
        """Encode with ``expert`` from the next observation (a release switch, on the
        encoder's thread between batches). It must read the same views."""
        if tuple(expert.spec.view_names) != tuple(self.views):
            raise ValueError(
                f'the new world expert reads the views {list(expert.spec.view_names)}, '
                f'this one {list(self.views)}'
            )
        self.expert = expert
        self.reads_prompt = bool(getattr(expert.spec, 'prompt', False))

    def joint_state(self, stamp_ns: int, q: np.ndarray) -> None:
        """The arm's joint positions at ``stamp_ns`` (the node feeds /joint_states)."""
        self.frozen_camera.joints.add(stamp_ns, q)

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def retract(self, entry: CacheEntry) -> None:
        """Withdraw a representation the camera is found to repeat (frozen): its stamp
        becomes older than any TTL. Once: a withdrawn one stays withdrawn."""
        if entry.stamp_ns == RETRACTED_STAMP_NS:
            return
        try:
            self.cache.touch(entry, RETRACTED_STAMP_NS)
            self.retracted += 1
        except CacheError:
            pass  # already replaced in its slot: nothing left to withdraw

    @property
    def world_calls(self) -> int:
        """World-expert calls for this encoder's frames (one expert may serve a fleet)."""
        return self.encodes

    def check(
        self, encoding: str, height: int, width: int, step: int, data, stamp_ns: int
    ) -> np.ndarray:
        """Validate layout and stamp (cheap, no copy): the RGB view, or ImageError (counted).
        The node calls it on arrival, so every bad frame is counted, even one that a newer
        frame would have replaced before the encoder got to it."""
        try:
            rgb = frame_to_array(encoding, height, width, step, data)
        except ImageError as exc:
            self.reject(exc.reason)
            raise
        age_ns = self.clock() - stamp_ns
        if age_ns < -self.max_future_ns:
            self.reject('stamp_future')
            raise ImageError(
                'stamp_future', f'stamp {-age_ns / 1e6:.0f} ms in the future (clock jump?)'
            )
        if age_ns > self.max_age_ns:
            self.reject('stamp_old')
            raise ImageError('stamp_old', f'stamp {age_ns / 1e6:.0f} ms old, past the cache TTL')
        return rgb

    def process(
        self,
        encoding: str,
        height: int,
        width: int,
        step: int,
        data,
        stamp_ns: int,
        prompt: str = '',
    ) -> EncodeOutcome:
        """Raise ImageError (counted) for a bad frame; otherwise return the cache entry."""
        begun = self.begin(encoding, height, width, step, data, stamp_ns, prompt)
        if isinstance(begun, EncodeOutcome):
            return begun
        t0 = time.perf_counter()
        rep = self.expert.encode(begun.observation)
        return self.complete(begun, rep, (time.perf_counter() - t0) * 1e3)

    def begin(
        self,
        encoding: str,
        height: int,
        width: int,
        step: int,
        data,
        stamp_ns: int,
        prompt: str = '',
    ) -> EncodeOutcome | PendingEncode:
        """One-view observation: see ``begin_views``."""
        return self.begin_views(
            {self.views[0]: (encoding, height, width, step, data)}, stamp_ns, prompt
        )

    def begin_views(
        self, frames: dict, stamp_ns: int, prompt: str = ''
    ) -> EncodeOutcome | PendingEncode:
        """Validate every view ({view: (encoding, height, width, step, data)}) and look the
        observation up: a cache hit is done (EncodeOutcome); a new one comes back as a
        PendingEncode for ``complete`` once the expert encoded it (alone, or batched with
        other robots'). ImageError (counted) if a view is bad or missing. ``prompt``: the
        task's text, part of the observation for an expert that reads it (else ignored)."""
        t0 = time.perf_counter()
        missing = [v for v in self.views if v not in frames]
        if missing:
            self.reject('view_missing')
            raise ImageError('view_missing', f'the observation lacks the view(s) {missing}')
        views, fps = {}, {}
        for name in self.views:
            encoding, height, width, step, data = frames[name]
            views[name] = self.check(encoding, height, width, step, data, stamp_ns)
            fps[name] = fingerprint(encoding, height, width, data)
        fp = observation_fingerprint(fps)
        if self.reads_prompt:
            fp = with_prompt(fp, prompt)
        else:
            prompt = ''
        self.timer.add('validate', (time.perf_counter() - t0) * 1e3)
        # after a release switch, until the new model's first entry: nothing of the old
        # version is served as a hit (a static scene would otherwise never switch)
        entry = self.cache.lookup(fp) if self.cache.version == self.expert.version else None
        if entry is not None:
            moved = self.frozen_camera.frozen(fp, stamp_ns)
            if moved is not None:
                self.reject('frozen')
                self.retract(entry)
                raise ImageError(
                    'frozen',
                    f'the same frame again although the arm moved {moved * 1e3:.1f} mrad '
                    'between their stamps: camera frozen?',
                )
            if entry.stamp_ns == RETRACTED_STAMP_NS:
                # found repeated by a frozen camera: never refreshed again (a repeat the
                # joint states cannot tell about would otherwise serve it as fresh)
                self.reject('frozen')
                raise ImageError('frozen', "the same frame again, withdrawn as a frozen camera's")
            entry = self.cache.touch(entry, stamp_ns)
            self.frames += 1
            self.hits += 1
            return EncodeOutcome(entry, True, 0.0)
        self.frozen_camera.seen(fp, stamp_ns)
        return PendingEncode(fp, stamp_ns, views, prompt)

    def complete(self, pending: PendingEncode, rep: np.ndarray, encode_ms: float) -> EncodeOutcome:
        """Cache the representation the expert computed for ``pending``."""
        # counted together, before the cache write (which may fail: a remote store that
        # is down), so calls per distinct frame is exact at any instant
        self.encodes += 1
        self.frames += 1
        self.timer.add('encode', encode_ms)
        if encode_ms > self.timeout_ms:
            self.timeouts += 1
        t0 = time.perf_counter()
        # the dtype's name travels only where the array stores other words (bfloat16)
        dtype = getattr(self.expert.spec, 'dtype', 'float32')
        named = {} if str(getattr(rep, 'dtype', dtype)) == dtype else {'dtype': dtype}
        if self.cache.version != self.expert.version:
            # the first representation of a switched-to model: the ring changes version
            # (emptied) right before it is written, so readers meet one version or the
            # other, never a gap longer than this write
            self.cache.set_model_version(self.expert.version)
        entry = self.cache.put(pending.fp, pending.stamp_ns, rep, **named)
        self.timer.add('cache_write', (time.perf_counter() - t0) * 1e3)
        return EncodeOutcome(entry, False, encode_ms)

    def calls_per_frame(self) -> float:
        """World-expert calls per *distinct* frame (1.00 means encode-once holds)."""
        distinct = self.frames - self.hits
        return self.world_calls / distinct if distinct else float('nan')
