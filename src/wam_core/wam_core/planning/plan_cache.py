"""The plan cache (the design documents' semantic cache): a validated LLM plan reused for
the same or a near-identical instruction.

Keyed by the instruction's all-MiniLM-L6-v2 embedding and the planner's model version:
a lookup returns the cached plan of the most similar earlier instruction when their
cosine similarity is at least ``threshold`` (0.97: "put the red apple in the fridge"
and "Put the red apple in the fridge." share a plan; "... the green cube ..." does
not) and the plan was made by the same model version. Only plans that passed
validation (and grounding, by the caller) are stored; a bounded LRU.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from .plan import Plan


class PlanCache:
    def __init__(self, embedder, threshold: float = 0.97, capacity: int = 256):
        self.embedder = embedder  # wam_core.planning.embedding.SubtaskEmbedder
        self.threshold = threshold
        self.capacity = capacity
        self._entries: OrderedDict[tuple[str, str], tuple[np.ndarray, Plan]] = OrderedDict()
        self._lock = threading.Lock()  # N robots' planning threads share one cache
        self.hits = self.misses = 0

    def _key_vector(self, instruction: str) -> np.ndarray:
        return self.embedder.vector(' '.join(instruction.lower().split()))

    def get(self, instruction: str, model_version: str) -> Plan | None:
        vec = self._key_vector(instruction)
        with self._lock:
            best, best_sim = None, -1.0
            for (version, text), (v, _plan) in self._entries.items():
                if version != model_version:
                    continue
                sim = float(np.dot(vec, v))
                if sim > best_sim:
                    best, best_sim = (version, text), sim
            if best is not None and best_sim >= self.threshold:
                self._entries.move_to_end(best)
                return self._entries[best][1]
            return None

    def count(self, hit: bool) -> None:
        """Whether a lookup's plan was used (the caller grounds it first)."""
        with self._lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1

    def put(self, instruction: str, model_version: str, plan: Plan) -> None:
        vec = self._key_vector(instruction)
        with self._lock:
            self._entries[(model_version, instruction)] = (vec, plan)
            self._entries.move_to_end((model_version, instruction))
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else float('nan')
