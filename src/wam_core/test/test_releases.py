"""Model releases without ROS: the registry, the switch on the tick and on the encoder, the
monitor during a switch, and the canary's objectives."""

import json
import os
import shutil
import sqlite3
import time
from dataclasses import replace

import numpy as np
import pytest

from wam_core.cache.inprocess import InProcessCache
from wam_core.common.config import SafetyConfig
from wam_core.common.robot import TABLETOP_ARM, load_robot_description
from wam_core.control.safety import SafetyMonitor
from wam_core.models.default_models import write_default_models
from wam_core.models.manifest import read_manifest, write_manifest
from wam_core.models.registry import load_action_expert, load_world_expert
from wam_core.releases.objectives import Objectives, RobotSnapshot, RobotWindow, breaches
from wam_core.releases.registry import (
    CANARY,
    LIVE,
    REGISTERED,
    RETIRED,
    ROLLED_BACK,
    Registry,
    RegistryError,
    verify_release_dir,
)
from wam_core.serving.action_ticker import ActionTicker, Descriptor
from wam_core.serving.frame_encoder import FrameEncoder
from wam_sim.synthetic import SyntheticScene


@pytest.fixture(scope='module')
def pairs(tmp_path_factory):
    """Two seeded pairs: two releases of one robot with different world versions."""
    root = tmp_path_factory.mktemp('releases')
    return {seed: write_default_models(str(root / f'seed{seed}'), seed=seed) for seed in (0, 1)}


def _pass(world_dir, action_dir, config):  # the kit's rows for a pair already checked
    return [{'name': 'manifest', 'passed': True, 'figure': '', 'reason': ''}]


@pytest.fixture
def registry(tmp_path):
    with Registry(str(tmp_path / 'releases.db')) as reg:
        yield reg


# the registry --------------------------------------------------------------------------
def test_a_pair_that_passes_the_kit_is_registered_with_its_versions_and_digests(registry, pairs):
    p = pairs[0]
    rel = registry.register('r0', p['world_dir'], p['action_dir'], TABLETOP_ARM, 'first')
    assert rel.state == REGISTERED
    assert rel.world_version == read_manifest(p['world_dir']).version == 'default-seed0'
    assert rel.accepted_world_version == rel.world_version
    assert rel.robot_name == 'tabletop_arm' and len(rel.robot_digest) == 64
    assert rel.world_type == 'vit' and rel.action_type == 'object_mlp'
    assert {c['name'] for c in rel.conformance} >= {'manifest', 'contract', 'determinism'}
    assert all(c['passed'] for c in rel.conformance)
    again = Registry(registry.path).get('r0')  # it is on disk
    assert again.world_digest == rel.world_digest and again.conformance == rel.conformance
    [row] = registry.history('r0')
    assert (row.from_state, row.to_state, row.reason) == (None, REGISTERED, 'first')


def test_a_pair_that_fails_conformance_is_refused_and_nothing_is_written(
    registry, pairs, tmp_path
):
    # an action expert that accepts another world version: its manifest says so
    bad = str(tmp_path / 'action_other_world')
    shutil.copytree(pairs[0]['action_dir'], bad)
    m = read_manifest(bad)
    write_manifest(bad, m.name, m.version, {**m.extra, 'world_version': 'default-seed9'})
    with pytest.raises(RegistryError, match='accepts world version'):
        registry.register('bad', pairs[0]['world_dir'], bad, TABLETOP_ARM, 'x')
    # the same check made by the kit itself, on a pair whose manifests do not say it
    write_manifest(
        bad, m.name, m.version, {k: v for k, v in m.extra.items() if k != 'world_version'}
    )
    with pytest.raises(RegistryError, match='conformance kit failed: contract'):
        registry.register('bad', pairs[1]['world_dir'], bad, TABLETOP_ARM, 'x')
    assert registry.list() == [] and registry.history() == []


def test_a_tampered_directory_is_refused_at_registration_and_at_load(registry, pairs, tmp_path):
    p = pairs[0]
    rel = registry.register(
        'r0', p['world_dir'], p['action_dir'], TABLETOP_ARM, 'x', conformance=_pass
    )
    verify_release_dir(p['world_dir'], rel.world_digest)
    # rewritten after registration (another build under the same path): refused at load
    copy = str(tmp_path / 'world')
    shutil.copytree(p['world_dir'], copy)
    m = read_manifest(copy)
    write_manifest(copy, m.name, 'another-build', m.extra)
    with pytest.raises(Exception, match='not the registered build'):
        verify_release_dir(copy, rel.world_digest)
    with open(os.path.join(copy, 'config.json'), 'a') as fh:
        fh.write(' ')
    with pytest.raises(RegistryError, match='sha256'):
        registry.register('r1', copy, p['action_dir'], TABLETOP_ARM, 'x', conformance=_pass)


def test_a_release_for_another_robot_is_refused(registry, pairs, tmp_path):
    from wam_system_tests.second_arm import write_description

    other = load_robot_description(write_description(str(tmp_path / 'arm')))
    p = pairs[0]
    # trained for the tabletop arm's joints: not registrable for the second arm
    with pytest.raises(RegistryError, match='trained for the joints'):
        registry.register('r0', p['world_dir'], p['action_dir'], other, 'x', conformance=_pass)
    registry.register('r0', p['world_dir'], p['action_dir'], TABLETOP_ARM, 'x', conformance=_pass)
    assert registry.check_robot('r0', TABLETOP_ARM).name == 'r0'
    with pytest.raises(RegistryError, match="is for robot 'tabletop_arm'"):
        registry.check_robot('r0', other)


def test_states_follow_the_rules_and_every_change_is_an_audit_row(registry, pairs):
    for seed in (0, 1):
        p = pairs[seed]
        registry.register(
            f'r{seed}', p['world_dir'], p['action_dir'], TABLETOP_ARM, 'x', conformance=_pass
        )
    registry.transition('r0', LIVE, 'the first live release', actor='ops')
    registry.transition('r1', CANARY, 'try it', robots=['robot1'], actor='ops')
    assert registry.get('r1').robots == ['robot1']
    with pytest.raises(RegistryError, match='cannot become registered'):
        registry.transition('r1', REGISTERED, 'no')
    registry.transition('r1', LIVE, 'canary held', actor='ops')
    assert registry.get('r0').state == RETIRED and registry.live().name == 'r1'
    assert registry.previous_live('r1').name == 'r0'
    registry.transition('r1', ROLLED_BACK, 'manual rollback', actor='ops')
    registry.transition('r0', LIVE, 'rollback of r1', actor='ops')
    rows = registry.history()
    assert [(r.release, r.from_state, r.to_state) for r in rows] == [
        ('r0', None, REGISTERED),
        ('r1', None, REGISTERED),
        ('r0', REGISTERED, LIVE),
        ('r1', REGISTERED, CANARY),
        ('r0', LIVE, RETIRED),
        ('r1', CANARY, LIVE),
        ('r1', LIVE, ROLLED_BACK),
        ('r0', RETIRED, LIVE),
    ]
    assert rows[3].robots == ['robot1'] and rows[3].actor == 'ops'
    # the audit cannot be rewritten, by this module or any other client of the file
    db = sqlite3.connect(registry.path)
    with pytest.raises(sqlite3.DatabaseError, match='append-only'):
        db.execute("UPDATE audit SET reason = 'nothing happened'")
    with pytest.raises(sqlite3.DatabaseError, match='append-only'):
        db.execute('DELETE FROM audit')
    db.close()
    assert len(registry.history()) == 8


def test_unknown_names_and_duplicates_are_clear_errors(registry, pairs):
    p = pairs[0]
    registry.register('r0', p['world_dir'], p['action_dir'], TABLETOP_ARM, 'x', conformance=_pass)
    with pytest.raises(RegistryError, match='already registered'):
        registry.register('r0', p['world_dir'], p['action_dir'], TABLETOP_ARM, 'x')
    with pytest.raises(RegistryError, match=r"no release named 'nope' \(registered: r0\)"):
        registry.get('nope')
    with pytest.raises(RegistryError, match='release name'):
        registry.register('a b', p['world_dir'], p['action_dir'], TABLETOP_ARM, 'x')
    with pytest.raises(RegistryError, match='say why'):
        registry.register('r9', p['world_dir'], p['action_dir'], TABLETOP_ARM, ' ')
    json.dumps([r.as_dict() for r in registry.list()])  # what --json prints


# the switch on the tick -----------------------------------------------------------------
def _put(cache, scene, i, world):
    rep = world.encode_batch([_obs(world, scene, i)])[0]
    return cache.put(f'{i:032x}', time.time_ns(), rep)


def _obs(world, scene, i):
    from wam_core.models.contract import Observation

    return Observation({v: scene.frame(i) for v in world.spec.view_names}, time.time_ns())


@pytest.fixture(scope='module')
def experts(pairs):
    return {
        s: (
            load_world_expert(pairs[s]['world_dir'], 'fp32'),
            load_action_expert(pairs[s]['action_dir']),
        )
        for s in (0, 1)
    }


def test_an_armed_release_serves_from_its_first_representation_and_never_mixes(experts):
    (w0, a0), (w1, a1) = experts[0], experts[1]
    scene = SyntheticScene(w0.spec.views[0].height)
    cache = InProcessCache(8, 60_000, w0.version)
    t = ActionTicker(a0, cache, w0.version, 7, a0.spec.conditioning_dim)
    t.tag = 'r0'
    t.set_joint_state(np.zeros(7))
    e = _put(cache, scene, 1, w0)
    t.set_descriptor(Descriptor(e.key, e.version, e.slot))
    assert t.tick().kind == 'chunk'
    # (an instance claims a robot only for a version it decodes)
    assert t.decodes(w0.version) and not t.decodes(w1.version) and not t.decodes(None)
    t.arm(a1, w1.version, 'r1')
    assert t.decodes(w1.version) and t.descriptor_version == w0.version
    # old-version representations keep being decoded by the old model
    for _ in range(3):
        r = t.tick()
        assert r.kind == 'chunk' and t.tag == 'r0' and t.model is a0
    # the ring changes version, the descriptor is not there yet: switch on the ring
    cache.set_model_version(w1.version)
    e1 = _put(cache, scene, 2, w1)
    r = t.tick()
    assert r.kind == 'chunk' and t.tag == 'r1' and t.model is a1 and t.version == w1.version
    assert t.switches == 1 and t.switched_at_ns > 0 and t.previous.tag == 'r0'
    expected = _decode(a1, _tensor(cache, e1))
    assert np.allclose(r.positions, expected, atol=1e-5)
    # a late descriptor of the replaced version is no mismatch: the newest entry serves
    t.set_descriptor(Descriptor(e.key, e.version, e.slot))
    late = t.tick()
    assert late.kind == 'chunk' and late.repr_key == e1.key
    # one of a version neither served nor replaced is
    t.set_descriptor(Descriptor(e.key, 'another-world', e.slot))
    assert t.tick().reason == 'version_mismatch'
    t.set_descriptor(Descriptor(e1.key, e1.version, e1.slot))
    assert t.tick().kind == 'chunk'
    # a rollback within the window: arm the previous (no load), switch back on its version
    t.arm(t.previous.model, t.previous.version, t.previous.tag)
    assert t.tick().kind == 'chunk' and t.tag == 'r1'
    cache.set_model_version(w0.version)
    _put(cache, scene, 3, w0)
    assert t.tick().kind == 'chunk' and t.tag == 'r0' and t.model is a0
    t.confirm()
    assert t.previous is None and t.mixed_version_ticks == 0
    assert t.decodes(w0.version) and not t.decodes(w1.version)
    # a standby's confirm: the armed release serves from now on, no tick needed
    t.arm(a1, w1.version, 'r1')
    assert not t.promote_armed('r2') and t.tag == 'r0'
    assert t.promote_armed('r1') and t.tag == 'r1' and t.model is a1 and t.armed is None
    assert t.version == w1.version and t.previous.tag == 'r0' and t.mixed_version_ticks == 0


def test_a_model_that_does_not_accept_the_representation_is_refused_not_decoded(experts):
    (w0, _), (_, a1) = experts[0], experts[1]
    scene = SyntheticScene(w0.spec.views[0].height)
    cache = InProcessCache(8, 60_000, w0.version)
    # a ticker told the wrong version for its model (what a broken switch would do)
    t = ActionTicker(a1, cache, w0.version, 7, a1.spec.conditioning_dim)
    t.set_joint_state(np.zeros(7))
    _put(cache, scene, 1, w0)
    r = t.tick()
    assert r.kind == 'degraded' and r.reason == 'mixed_version'
    assert t.mixed_version_ticks == 1 and t.chunks == 0


def _tensor(cache, entry):
    import torch

    return torch.from_numpy(np.array(cache.read(entry.slot, entry.version).array))[None]


def _decode(model, rep):
    import torch

    with torch.inference_mode():
        joint, subtask = torch.zeros(1, 7), torch.zeros(1, model.spec.conditioning_dim)
        return model.decode(model.prepare(rep), joint, subtask)[0].numpy()


# the switch on the encoder ----------------------------------------------------------
def test_a_switched_encoder_encodes_the_static_scene_again_and_the_ring_changes_version(
    experts,
):
    (w0, _), (w1, _) = experts[0], experts[1]
    scene = SyntheticScene(w0.spec.views[0].height)
    cache = InProcessCache(8, 60_000, w0.version)
    enc = FrameEncoder(w0, cache)
    frame = scene.frame(1).tobytes()
    h = w0.spec.views[0].height
    first = enc.process('rgb8', h, h, 3 * h, frame, time.time_ns())
    assert enc.process('rgb8', h, h, 3 * h, frame, time.time_ns()).cache_hit
    enc.use(w1)
    assert cache.version == w0.version  # nothing changes before the new model's entry
    out = enc.process('rgb8', h, h, 3 * h, frame, time.time_ns())
    assert not out.cache_hit and out.entry.version == w1.version == cache.version
    assert cache.read(first.entry.slot, w0.version).reason in ('version_mismatch', 'miss')
    assert enc.process('rgb8', h, h, 3 * h, frame, time.time_ns()).cache_hit


# the monitor during a switch -------------------------------------------------------
def test_a_switch_in_progress_is_not_a_version_mismatch():
    m = SafetyMonitor(SafetyConfig(required_nodes=[]), 0.0)
    m.on_versions(0.0, world='v1', accepted='v1')
    m.on_chunk(0.0)
    assert m.reset(0.0)[0] and not m.stopped  # started: nothing wrong
    m.on_chunk(0.2)
    m.on_versions(0.2, accepted='v1', also_accepted=('v2',))  # v2 armed
    m.on_versions(0.3, world='v2')
    assert not m.stopped
    m.on_chunk(0.4)
    m.on_versions(0.4, accepted='v2', also_accepted=('v1',))  # switched, v1 kept
    m.on_versions(0.5, accepted='v2')  # confirmed
    assert not m.stopped
    m.on_versions(0.6, world='v3')  # a version nobody decodes for
    assert m.stopped and 'version mismatch' in m.reason


# the canary's objectives -----------------------------------------------------------
def _snap(t, ticks, degraded=0, held=0, changed=0, stops=0, chunks=None, seam=0.0, mixed=0,
          at_limit=0):  # fmt: skip
    return RobotSnapshot(
        t, "r1", ticks, degraded, held, 0, mixed, stops, ticks * 14, changed, at_limit,
        ticks - degraded if chunks is None else chunks, seam,
    )  # fmt: skip


def test_objectives_judge_a_window_against_limits_and_the_live_robots():
    o = Objectives()
    a = _snap(0.0, 0)
    good = RobotWindow.between(a, _snap(10.0, 500, degraded=5))
    assert breaches(good, o, live_rate_hz=50.0) == []
    bad = RobotWindow.between(a, _snap(10.0, 500, degraded=100, changed=700, stops=1))
    reasons = breaches(bad, o, live_rate_hz=50.0, live_degraded_share=0.02)
    # a loaded host degrades the live robots too: not held against the release
    assert not any('degraded' in r for r in breaches(bad, o, 50.0, live_degraded_share=0.18))
    assert any('degraded ticks 20.0%, the live robots 2.0% (> 5.0% more)' in r for r in reasons)
    # ... and their spread: half of the live share on top of it is still the host's
    noisy = RobotWindow.between(a, _snap(10.0, 500, degraded=117, held=40))
    assert breaches(noisy, o, 40.0, live_degraded_share=0.167, live_held_ticks=30) == []
    worse = breaches(noisy, o, 40.0, live_degraded_share=0.12, live_held_ticks=10)
    assert worse == [
        'degraded ticks 23.4%, the live robots 12.0% (> 6.0% more)',
        'held ticks 40 > 25',
    ]
    assert any('gate changed 10.0%' in r for r in reasons)
    assert any('safety stops 1' in r for r in reasons)
    assert any('chunk rate 40.0 Hz is 80%' in r for r in reasons)
    parked = RobotWindow.between(a, _snap(10.0, 500, at_limit=700))
    assert breaches(parked, o) == ['joints at a limit in 10.0% of commands > 5.0%']
    seam = RobotWindow.between(a, _snap(10.0, 500, seam=0.4))
    assert breaches(seam, o) == ['seam jump 0.400 rad > 0.100']
    assert breaches(RobotWindow.between(a, _snap(10.0, 0)), o)[0].startswith('no ticks')


def test_a_joint_the_live_release_parked_is_not_counted_against_the_canary():
    # the shipped policy drifts arm_joint_6 to its stop in the drill's synthetic scene
    # (after ~20 s): a good release that keeps it there must not be rolled back for it,
    # one that parks another joint must
    o = Objectives()
    a = replace(_snap(0.0, 0), at_limit_by_joint={'j2': 0, 'j6': 0})
    kept = replace(_snap(10.0, 500, at_limit=1000), at_limit_by_joint={'j2': 0, 'j6': 1000})
    assert breaches(RobotWindow.between(a, kept), o) == [
        'joints at a limit in 14.3% of commands > 5.0%'
    ]
    assert breaches(RobotWindow.between(a, kept, frozenset({'j6'})), o) == []
    seeker = replace(_snap(10.0, 500, at_limit=1800), at_limit_by_joint={'j2': 800, 'j6': 1000})
    assert breaches(RobotWindow.between(a, seeker, frozenset({'j6'})), o) == [
        'joints at a limit in 11.4% of commands > 5.0% (not counting j6, parked there before)'
    ]
    # a gate without per-joint counts: the total, as before
    old = RobotWindow.between(_snap(0.0, 0), _snap(10.0, 500, at_limit=1000), frozenset({'j6'}))
    assert old.at_limit_share == pytest.approx(1000 / 7000) and old.not_counted == ()


def test_one_world_expert_serves_two_releases_each_robot_in_its_own_version(experts):
    from wam_core.serving.fleet_encoder import FleetEncoder, Frame

    (w0, _), (w1, _) = experts[0], experts[1]
    h = w0.spec.views[0].height
    caches = {r: InProcessCache(8, 60_000, w0.version) for r in ('robot1', 'robot2')}
    encs = {r: FrameEncoder(w0, c) for r, c in caches.items()}
    fleet = FleetEncoder(w0, encs)
    scene = SyntheticScene(h)

    def batch(i):
        return [(r, Frame('rgb8', h, h, 3 * h, scene.frame(i + k).tobytes(), time.time_ns()))
                for k, r in enumerate(encs)]  # fmt: skip

    assert {out.entry.version for _, _, out in fleet.encode(batch(0))} == {w0.version}
    encs['robot1'].use(w1)  # a canary: robot1 on the new release, robot2 on the live one
    w0_calls, w1_calls = w0.calls, w1.calls
    out = {r: o for r, _, o in fleet.encode(batch(10))}
    assert out['robot1'].entry.version == w1.version == caches['robot1'].version
    assert out['robot2'].entry.version == w0.version == caches['robot2'].version
    assert (w0.calls - w0_calls, w1.calls - w1_calls) == (1, 1)  # one pass per model
    assert fleet.world_calls == 4 and fleet.batch_mean == pytest.approx(4 / 3)


def test_the_robot_whose_frame_waited_longest_is_encoded_first(experts):
    from wam_core.serving.fleet_encoder import FleetEncoder, Frame

    (w0, _), (w1, _) = experts[0], experts[1]
    h = w0.spec.views[0].height
    encs = {r: FrameEncoder(w0, InProcessCache(8, 60_000, w0.version)) for r in ('a', 'b')}
    encs['a'].use(w1)
    fleet = FleetEncoder(w0, encs)
    scene = SyntheticScene(h)
    now = time.time_ns()
    for older in ('a', 'b'):
        frames = [
            (r, Frame('rgb8', h, h, 3 * h, scene.frame(k + (7 if older == 'a' else 0)).tobytes(),
                      now - (10_000_000 if r == older else 0)))
            for k, r in enumerate(('b', 'a'))
        ]  # fmt: skip
        order = [r for r, _, _ in fleet.encode(frames)]
        assert order[0] == older, (older, order)
