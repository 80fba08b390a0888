"""Subtask embeddings with the real all-MiniLM-L6-v2 shipped on PyPI."""

import numpy as np
import pytest

from wam_core.planning.embedding import DIM, SubtaskEmbedder


@pytest.fixture(scope='module')
def emb():
    return SubtaskEmbedder(cache_size=4)


def test_embedding_is_a_real_sentence_embedding(emb):
    a = emb.embed('grasp the red apple')
    b = emb.embed('pick up the red apple')
    c = emb.embed('open the fridge door')
    assert a.shape == (DIM,) and abs(np.linalg.norm(a) - 1) < 1e-5
    assert np.dot(a, b) > np.dot(a, c) + 0.1  # paraphrase closer than another skill


def test_lru_cache_embeds_once_and_evicts(emb):
    calls = emb.model_calls
    for _ in range(5):
        emb.embed('transport the red apple to the fridge')
    assert emb.model_calls == calls + 1
    for i in range(5):
        emb.embed(f'locate object {i}')
    assert len(emb._lru) == 4 and 'transport the red apple to the fridge' not in emb._lru


def test_intent_weights_point_at_the_skill(emb):
    w = emb.intents(emb.embed('grasp the red apple'))
    assert set(w) >= {'grasp', 'navigate', 'place'} and max(w, key=w.get) == 'grasp'
    w = emb.intents(emb.embed('open the fridge'))
    assert max(w, key=w.get) == 'open'
