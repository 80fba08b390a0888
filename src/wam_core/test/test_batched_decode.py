"""Several robots' ticks decoded together (an action-expert instance), without ROS."""

import time

import numpy as np
import pytest

from wam_core.cache.inprocess import InProcessCache
from wam_core.models.registry import load_action_expert, load_world_expert
from wam_core.serving.action_ticker import ActionTicker, Descriptor
from wam_core.serving.batched_decode import decode_together, too_slow_for_an_instance
from wam_sim.synthetic import SyntheticScene


@pytest.fixture(scope='module')
def experts(models):
    world = load_world_expert(models['world_dir'], 'fp32')
    action = load_action_expert(models['action_dir'])
    return world, action


def _robots(experts, n, stale=()):
    """n tickers sharing one model, each with its own cache, frame and joint state."""
    world, action = experts
    out = []
    for i in range(n):
        cache = InProcessCache(4, 1000, world.version)
        age = 5_000_000_000 if i in stale else 0
        rep = world.encode(SyntheticScene(128).frame(i))
        e = cache.put(f'{i:032x}', time.time_ns() - age, rep)
        t = ActionTicker(action, cache, action.spec.world_version, 7, 384)
        t.set_joint_state(np.linspace(-0.3, 0.3, 7) + 0.05 * i)
        t.set_descriptor(Descriptor(e.key, e.version, e.slot))
        out.append(t)
    return out


def test_robots_decoded_in_one_forward_get_the_chunks_each_would_get_alone(experts):
    together, largest = decode_together(_robots(experts, 3))
    alone = [t.tick() for t in _robots(experts, 3)]
    assert largest == 3
    for a, b in zip(together, alone, strict=True):
        assert a.kind == b.kind == 'chunk' and a.new_representation
        assert np.allclose(a.positions, b.positions, atol=1e-5)
    # different robots, different chunks: the rows were not mixed up
    assert not np.allclose(together[0].positions, together[1].positions, atol=1e-3)


def test_batches_are_at_most_max_size(experts):
    _, largest = decode_together(_robots(experts, 3), max_size=2)
    assert largest == 2


def test_one_robots_stale_representation_leaves_the_others_chunks(experts):
    tickers = _robots(experts, 3, stale={1})
    res, largest = decode_together(tickers)
    assert [r.kind for r in res] == ['chunk', 'degraded', 'chunk']
    assert res[1].reason == 'stale' and largest == 2
    assert tickers[1].degraded == {'stale': 1} and tickers[0].chunks == 1


def test_a_batch_that_raises_is_decoded_robot_by_robot_so_a_fault_stays_its_own(experts):
    world, action = experts

    class Faulty:
        """The shipped model, except that robot 2's joint state breaks its decode."""

        spec, dtype, device = action.spec, action.dtype, action.device
        prepare = staticmethod(action.prepare)

        def decode(self, ctx, joint, cond):
            if float(joint[0, 0]) > 0.0:
                raise RuntimeError('this robot breaks the model')
            return action.decode(ctx, joint, cond)

        def decode_batch(self, ctxs, joints, conds):
            raise RuntimeError('the batch breaks with it')

    tickers = _robots(experts, 3)
    tickers[2].set_joint_state(np.full(7, 0.5))
    model = Faulty()
    for t in tickers:
        t.model = model
    res, largest = decode_together(tickers)
    assert largest == 1
    assert [getattr(r, 'kind', None) for r in res[:2]] == ['chunk', 'chunk']
    assert isinstance(res[2], RuntimeError) and 'breaks the model' in str(res[2])
    assert tickers[2]._scene is None  # its prepared scene is not trusted again


def test_an_instance_refuses_a_slow_model_by_its_best_pass_not_a_contended_median():
    budget = 15.0
    # a 0.4 ms decode warmed up while a fleet comes up on the same cores
    assert too_slow_for_an_instance([0.4, 31.0, 42.5, 29.1, 35.6], budget) is None
    # a model slower than the budget is slower in every pass
    why = too_slow_for_an_instance([61.0, 64.2, 70.3], budget)
    assert why is not None and '61.0 ms' in why and '15 ms' in why
    assert too_slow_for_an_instance([], budget) is None
