"""The world expert's batching window: frames of different robots, one forward pass.

Each robot has at most one waiting frame (a newer one replaces it: the newest
observation is the one worth encoding). A batch goes when every robot that can join has
a frame waiting (up to ``max_size``), or when the oldest waiting frame has waited
``max_wait_s`` — so no robot's frame waits longer than the window for the others. With
one robot the window never waits. ROS-free and clock-explicit; the world-expert node
holds it under its own lock and condition variable.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any


class BatchWindow:
    def __init__(self, max_size: int, max_wait_s: float, members: int):
        if max_size < 1 or members < 1:
            raise ValueError(f'max_size {max_size} and members {members} must be >= 1')
        self.max_size = min(max_size, members)  # a batch never waits for robots that do not exist
        self.max_wait_s = max_wait_s
        self._waiting: dict[Hashable, tuple[Any, float]] = {}  # robot -> (frame, arrived)
        self.superseded = 0  # frames replaced by a newer one of the same robot
        self.batches = 0
        self.frames = 0  # frames that left in a batch

    def put(self, robot: Hashable, frame: Any, now: float) -> None:
        """A robot's new frame; it keeps its place in the window if one was waiting."""
        if robot in self._waiting:
            self.superseded += 1
            arrived = self._waiting[robot][1]
        else:
            arrived = now
        self._waiting[robot] = (frame, arrived)

    def due_in(self, now: float) -> float | None:
        """Seconds until the next batch should go (0: now); None when nothing waits."""
        if not self._waiting:
            return None
        if len(self._waiting) >= self.max_size:
            return 0.0
        oldest = min(arrived for _, arrived in self._waiting.values())
        return max(0.0, oldest + self.max_wait_s - now)

    def take(self) -> list[tuple[Hashable, Any]]:
        """The next batch: up to ``max_size`` frames, the longest-waiting first."""
        order = sorted(self._waiting.items(), key=lambda kv: kv[1][1])[: self.max_size]
        for robot, _ in order:
            del self._waiting[robot]
        if order:
            self.batches += 1
            self.frames += len(order)
        return [(robot, frame) for robot, (frame, _) in order]

    @property
    def batch_mean(self) -> float:
        """Mean frames per batch (frames per world-expert forward pass, cache hits included)."""
        return self.frames / self.batches if self.batches else float('nan')
