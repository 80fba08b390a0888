"""One world expert for many robots: each robot's frames encoded once, batched together.

Every robot keeps its own ``FrameEncoder`` (its own cache, fingerprints, frozen-camera
check and counters), so one robot's representations never reach another's cache and
world-expert calls per distinct frame are exact per robot. A batch taken from the
``BatchWindow`` is validated and looked up robot by robot; the frames that need an
encode go through the expert in one forward pass.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from ..cache.protocol import CacheError
from .frame_encoder import EncodeOutcome, FrameEncoder, PendingEncode
from .image import ImageError


@dataclass
class Frame:
    """A camera frame's fields, as the node got them (``sensor_msgs/Image`` layout): the
    primary view's, with the observation's other views (gathered by ``view_sync``)."""

    encoding: str
    height: int
    width: int
    step: int
    data: object
    stamp_ns: int
    source: object = None  # the caller's own (the message, for its header)
    view: str = 'front'  # which view this frame is
    others: dict[str, Frame] | None = None  # the other views of the same observation
    prompt: str = ''  # the robot's active subtask, for a world expert that reads text

    def layout(self) -> tuple:
        return (self.encoding, self.height, self.width, self.step, self.data)

    def view_frames(self) -> dict[str, tuple]:
        """{view: (encoding, height, width, step, data)} for every view it carries."""
        out = {self.view: self.layout()}
        for name, f in (self.others or {}).items():
            out[name] = f.layout()
        return out


class FleetEncoder:
    def __init__(self, expert, encoders: Mapping[str, FrameEncoder]):
        self.expert = expert
        self.encoders = dict(encoders)
        # the models' own counts of the calls and forward passes made for this fleet,
        # summed over every model that encoded (several during a canary, each dropped
        # once no robot uses it: the counts are kept here, not the models)
        self.calls = 0
        self.forwards = 0

    def encode(
        self, batch: list[tuple[str, Frame]]
    ) -> list[tuple[str, Frame, EncodeOutcome | ImageError | CacheError]]:
        """Each robot's frame -> its cache entry (hit or new), or the ImageError (counted),
        or the CacheError of that robot's cache write: one robot's failure never costs
        another robot its representation."""
        results: list = []
        pending: list[tuple[str, Frame, PendingEncode]] = []
        for robot, f in batch:
            try:
                begun = self.encoders[robot].begin_views(f.view_frames(), f.stamp_ns, f.prompt)
            except (ImageError, CacheError) as exc:  # a bad frame; a cache that failed
                results.append((robot, f, exc))
                continue
            if isinstance(begun, EncodeOutcome):
                results.append((robot, f, begun))
            else:
                pending.append((robot, f, begun))
        # one forward pass per model: during a release canary the robots' encoders may
        # serve different world experts (each robot's representations in its own version)
        by_expert: dict[int, list] = {}
        for item in pending:
            by_expert.setdefault(id(self.encoders[item[0]].expert), []).append(item)
        # the group holding the oldest frame goes first: no robot's representations are
        # always a forward pass later than the others' (a canary robot would otherwise be
        # judged on the serving order, not on its release)
        for group in sorted(by_expert.values(), key=lambda g: min(f.stamp_ns for _, f, _ in g)):
            expert = self.encoders[group[0][0]].expert
            calls, forwards = expert.calls, expert.forwards
            t0 = time.perf_counter()
            reps = expert.encode_batch([p.observation for _, _, p in group])
            ms = (time.perf_counter() - t0) * 1e3  # each frame waited for the whole pass
            self.calls += expert.calls - calls
            self.forwards += expert.forwards - forwards
            for (robot, f, p), rep in zip(group, reps, strict=True):
                try:
                    results.append((robot, f, self.encoders[robot].complete(p, rep, ms)))
                except CacheError as exc:  # this robot's cache (a store that is down)
                    results.append((robot, f, exc))
        return results

    @property
    def batch_mean(self) -> float:
        """Frames per world-expert forward pass."""
        return self.calls / self.forwards if self.forwards else float('nan')

    @property
    def world_calls(self) -> int:
        """Calls of every model that encoded for the fleet (several during a canary)."""
        return self.calls
