"""The expert contract, the registry and the conformance kit: the shipped pair passes, a
broken pair fails with the reason."""

import dataclasses
import json
import os
import shutil
import time

import numpy as np
import pytest
import torch

from wam_core.common.paths import default_config, workspace_root
from wam_core.models import check
from wam_core.models.contract import ActionExpertSpec, ContractError, WorldExpertSpec
from wam_core.models.registry import (
    ModelLoadError,
    available,
    load_action_expert,
    load_world_expert,
)

MODELS = os.path.join(workspace_root(), 'models')


@pytest.fixture(scope='module')
def pair(models):
    return load_world_expert(models['world_dir']), load_action_expert(models['action_dir'])


@pytest.fixture(scope='module')
def budgets():
    return check.budgets_from_config(default_config())


def _by_name(checks):
    return {c.name: c for c in checks}


def test_the_shipped_pair_passes_every_check():
    checks = check.check_dirs(
        os.path.join(MODELS, 'world_expert'), os.path.join(MODELS, 'action_expert')
    )
    assert [c.name for c in checks] == [
        'manifest',
        'contract',
        'joints',
        'period',
        'world_outputs',
        'action_outputs',
        'determinism',
        'cached_context',
        'latency',
    ]
    # the latency verdict is this machine's load at the time: its figures must be there
    assert all(c.passed for c in check.untimed(checks)), check.table(checks)
    assert check.timed_ran(checks), check.table(checks)
    assert 'decode' in _by_name(checks)['latency'].figure


def test_the_shipped_types_are_registered():
    assert 'vit' in available('wam.world_experts')
    assert 'object_mlp' in available('wam.action_experts')


class _Wrapped:
    """A real expert with one thing broken."""

    def __init__(self, inner, **overrides):
        self._inner = inner
        self.__dict__.update(overrides)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_a_world_expert_returning_the_wrong_shape_fails(pair, budgets):
    world, action = pair
    bad = _Wrapped(world, encode=lambda obs: world.encode(obs)[:-1])
    bad.encode_batch, bad.warmup = world.encode_batch, world.warmup
    result = _by_name(check.run_checks(bad, action, budgets))['world_outputs']
    assert not result.passed and 'shape (64, 192), declared (65, 192)' in result.reason


def test_an_action_expert_returning_nan_fails(pair, budgets):
    world, action = pair
    bad = _Wrapped(action, decode=lambda c, q, s: action.decode(c, q, s) * float('nan'))
    bad.prepare = action.prepare
    result = _by_name(check.run_checks(world, bad, budgets))['action_outputs']
    assert not result.passed and 'NaN/inf' in result.reason


def test_an_action_expert_missing_a_joint_fails(pair, budgets):
    world, action = pair
    spec = action.spec
    six = ActionExpertSpec(**{**spec.__dict__, 'joint_names': spec.joint_names[:-1]})
    bad = _Wrapped(action, spec=six)
    bad.prepare, bad.decode = action.prepare, action.decode
    result = _by_name(check.run_checks(world, bad, budgets))['joints']
    assert not result.passed and "missing ['gripper_joint']" in result.reason


def test_a_pair_that_does_not_fit_fails_the_contract(pair, budgets):
    world, action = pair
    other = ActionExpertSpec(**{**action.spec.__dict__, 'representation_shape': (10, 192)})
    bad = _Wrapped(action, spec=other)
    bad.prepare, bad.decode = action.prepare, action.decode
    (result,) = check.run_checks(world, bad, budgets)
    assert result.name == 'contract' and not result.passed
    assert 'shape (10, 192)' in result.reason


def test_specs_check_their_own_declarations():
    with pytest.raises(ContractError, match='at least one view'):
        WorldExpertSpec(views=(), view_shape=(1, 1)).check()
    with pytest.raises(ContractError, match='output'):
        ActionExpertSpec(('a',), 10, 0.02, (1, 1), 4, 'v', output='velocity').check()


def _copy(src, tmp_path, name):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return str(dst)


def _edit_manifest(model_dir, **extra):
    path = os.path.join(model_dir, 'manifest.json')
    with open(path) as fh:
        doc = json.load(fh)
    doc['extra'].update(extra)
    for k, v in extra.items():
        if v is None:
            del doc['extra'][k]
    with open(path, 'w') as fh:
        json.dump(doc, fh)


def test_the_registry_refuses_unknown_and_missing_types(models, tmp_path):
    d = _copy(models['world_dir'], tmp_path, 'w1')
    _edit_manifest(d, type='nobody_registered_this')
    with pytest.raises(ModelLoadError, match="type 'nobody_registered_this'.*known: .*vit"):
        load_world_expert(d)
    _edit_manifest(d, type=None)
    with pytest.raises(ModelLoadError, match='names no type'):
        load_world_expert(d)


def test_the_command_fails_on_a_tampered_model_with_the_reason(models, tmp_path, capsys):
    d = _copy(models['action_dir'], tmp_path, 'a1')
    with open(os.path.join(d, 'model.safetensors'), 'r+b') as fh:
        fh.seek(-4, 2)
        fh.write(b'\0\0\0\0')
    assert check.main([models['world_dir'], d]) == 1
    out = capsys.readouterr().out
    assert 'manifest  FAIL' in out and 'sha256' in out and 'FAILED (manifest)' in out


def test_the_command_passes_a_good_pair_and_writes_json(models, tmp_path, capsys):
    # the seeded pair: untrained but conformant (--untimed: as make test runs it)
    out = tmp_path / 'kit.json'
    argv = [models['world_dir'], models['action_dir'], '--json', str(out), '--untimed']
    assert check.main(argv) == 0
    results = {r['name']: r for r in json.loads(out.read_text())}
    assert len(results) == 9 and 'encode' in results['latency']['figure']
    assert all(r['passed'] for name, r in results.items() if name != 'latency')
    assert 'conformance: passed (latency not judged)' in capsys.readouterr().out


def test_a_delta_expert_is_served_as_positions(pair):
    """The ticker adds a delta expert's offsets to the joint state it decoded from."""
    from wam_core.cache.inprocess import InProcessCache
    from wam_core.serving.action_ticker import ActionTicker, Descriptor

    world, action = pair

    class Delta(_Wrapped):
        pass

    delta = Delta(action, spec=ActionExpertSpec(**{**action.spec.__dict__, 'output': 'delta'}))
    delta.prepare = action.prepare
    delta.decode = lambda c, q, s: torch.full((1, action.spec.horizon, 7), 0.01)
    cache = InProcessCache(4, 1000, world.version)
    e = cache.put('cd' * 16, time.time_ns(), world.encode(np.zeros((128, 128, 3), np.uint8)))
    t = ActionTicker(delta, cache, world.version, 7, 384)
    q = np.linspace(-0.3, 0.3, 7)
    t.set_joint_state(q)
    t.set_descriptor(Descriptor(e.key, e.version, e.slot))
    res = t.tick()
    assert res.kind == 'chunk'
    assert np.allclose(res.positions, q.astype(np.float32) + 0.01, atol=1e-6)


def test_an_encode_over_its_budget_fails_the_latency_check(pair, budgets):
    """The timed verdict the suite leaves to the kit's own runs still fails a slow pair
    (a budget no forward can meet, so the verdict does not depend on the machine)."""
    world, action = pair
    checks = check.run_checks(world, action, dataclasses.replace(budgets, encode_ms=1e-3), 8)
    latency = _by_name(checks)['latency']
    assert not latency.passed
    assert 'encode p99' in latency.reason and 'over the 0.001 ms budget' in latency.reason
    assert check.timed_ran(checks)
    assert 'latency' not in {c.name for c in check.untimed(checks)}
    assert all(c.passed for c in check.untimed(checks)), check.table(checks)


def test_loading_the_experts_prints_no_progress_bar(models, capfd):
    """A node's log is line-oriented: no "Loading weights" bar per model (three of the
    demo's lines), and the bars are back on for whoever wants them afterwards."""
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()
    load_world_expert(models['world_dir'])
    load_action_expert(models['action_dir'])
    err = capfd.readouterr().err
    assert 'Loading weights' not in err and '%|' not in err, err
    assert hf_logging.is_progress_bar_enabled()
