"""The world expert's CPU encode as TorchScript graphs: the same representation as the
eager encode, the graphs (not the Python module nor the Python preprocessing) run it, a
failed trace leaves the expert eager with the reason; and what precision 'auto' gives."""

import os

import numpy as np
import pytest
import torch

from wam_core.common.paths import workspace_root
from wam_core.models.contract import Observation
from wam_core.models.precision import int8_engine, resolve_precision
from wam_core.models.registry import enable_torchscript
from wam_core.models.torchscript import frames_graph
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

    # from here neither the Python module nor the Python preprocessing may run: the
    # graphs hold the whole encode, normalisation included
    def no_eager(*args, **kwargs):
        raise AssertionError('the eager path ran')

    monkeypatch.setattr(world.model, 'forward', no_eager)
    monkeypatch.setattr(world, 'preprocess', no_eager)
    np.testing.assert_allclose(world.encode(obs[0]), eager_one, rtol=1e-4, atol=1e-5)
    for got, want in zip(world.encode_batch(obs), eager_two, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(AssertionError, match='the eager path ran'):
        world.encode(larger)  # a camera at another size: resized in Python, eager as before
    with pytest.raises(AssertionError, match='the eager path ran'):
        world.encode_batch(_observations(world, 3))  # no graph for 3: eager, as before
    monkeypatch.undo()
    np.testing.assert_allclose(world.encode(larger), eager_larger, rtol=1e-4, atol=1e-5)


def test_a_forward_that_cannot_be_traced_stays_eager_with_the_reason():
    class NoHiddenState(torch.nn.Module):
        def forward(self, pixel_values):
            return {'logits': pixel_values.mean()}  # no last_hidden_state

    one = torch.ones(3)
    example = torch.zeros(1, 8, 8, 3, dtype=torch.uint8)
    graph, why = frames_graph(NoHiddenState(), one, one, torch.float32, example)
    assert graph is None and 'last_hidden_state' in why

    class Plugin:  # an expert written to the contract, without the optional method
        name = 'plugin'

    assert 'has no enable_torchscript' in enable_torchscript(Plugin(), (1,))


def test_auto_is_int8_for_the_vit_on_a_cpu_and_bf16_on_a_gpu():
    assert int8_engine()  # this torch build quantizes (x86 / fbgemm)
    assert resolve_precision('auto', 'cpu', int8=True) == 'int8'
    assert resolve_precision('auto', 'cuda', int8=True) == 'bf16'
    assert resolve_precision('auto', 'cpu') in ('bf16', 'fp32')  # a model without int8
    assert WorldExpert(WORLD, precision='auto').precision == 'int8'


def test_at_int8_a_batch_shares_one_activation_scale():
    """Dynamic quantization scales a forward's activations together: a robot's
    representation batched with another robot's frames differs a little from its own
    alone (fp32 batches exactly); docs/fleet.md says so."""
    int8, fp32 = (WorldExpert(WORLD, precision=p) for p in ('int8', 'fp32'))
    obs = _observations(int8, 2)
    alone, batched = int8.encode(obs[0]), int8.encode_batch(obs)[0]
    rel = np.linalg.norm(batched - alone) / np.linalg.norm(alone)
    assert 0 < rel < 0.05, rel
    np.testing.assert_allclose(fp32.encode_batch(obs)[0], fp32.encode(obs[0]), atol=1e-5)
