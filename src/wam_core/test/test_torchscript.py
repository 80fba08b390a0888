"""The world expert's CPU forward as TorchScript graphs: the same representation as the
eager forward, the graphs (not the Python module) run it, and a failed trace leaves the
expert eager with the reason."""

import os

import numpy as np
import pytest
import torch

from wam_core.common.paths import workspace_root
from wam_core.models.contract import Observation
from wam_core.models.registry import enable_torchscript
from wam_core.models.torchscript import pixels_graph
from wam_core.models.world_expert import WorldExpert

WORLD = os.path.join(workspace_root(), 'models', 'world_expert')


def _observations(world, n, size=128):
    rng = np.random.default_rng(3)
    frame = lambda: rng.integers(0, 255, (size, size, 3), dtype=np.uint8)  # noqa: E731
    return [Observation({v: frame() for v in world.spec.view_names}) for _ in range(n)]


@pytest.mark.parametrize('precision', ['fp32', 'int8'])
def test_the_scripted_forward_gives_the_eager_representation(precision, monkeypatch):
    world = WorldExpert(WORLD, precision=precision)
    obs, larger = _observations(world, 2), _observations(world, 1, size=160)[0]
    eager_one, eager_two = world.encode(obs[0]), world.encode_batch(obs)
    eager_larger = world.encode(larger)  # resized to 128 px before the forward
    views = len(world.spec.views)
    assert enable_torchscript(world, (1, 2)) == ''
    assert world.scripted_frame_counts == (views, 2 * views)

    # from here the Python module must not run: the graphs hold the whole forward
    def no_eager(*args, **kwargs):
        raise AssertionError('the eager forward ran')

    monkeypatch.setattr(world.model, 'forward', no_eager)
    np.testing.assert_allclose(world.encode(obs[0]), eager_one, rtol=1e-4, atol=1e-5)
    for got, want in zip(world.encode_batch(obs), eager_two, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # a camera at another size: resized in Python, then the pixels' graph
    np.testing.assert_allclose(world.encode(larger), eager_larger, rtol=1e-4, atol=1e-5)
    with pytest.raises(AssertionError, match='the eager forward ran'):
        world.encode_batch(_observations(world, 3))  # no graph for 3: eager, as before


def test_a_forward_that_cannot_be_traced_stays_eager_with_the_reason():
    class NoHiddenState(torch.nn.Module):
        def forward(self, pixel_values):
            return {'logits': pixel_values.mean()}  # no last_hidden_state

    graph, why = pixels_graph(NoHiddenState(), torch.zeros(1, 3, 8, 8))
    assert graph is None and 'last_hidden_state' in why

    class Plugin:  # an expert written to the contract, without the optional method
        name = 'plugin'

    assert 'has no enable_torchscript' in enable_torchscript(Plugin(), (1,))
