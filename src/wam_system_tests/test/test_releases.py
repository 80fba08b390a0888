"""Model releases end to end: the command line on a registry, and the drill on a running
2-robot fleet (real processes, real DDS): a switch and a rollback with no mixed-version
tick, no stale or unsafe point and no safety stop, and two bad canaries that roll back by
themselves."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from wam_core.models.default_models import write_default_models
from wam_core.models.manifest import read_manifest, write_manifest
from wam_interfaces.msg import ActionExpertStatus, WorldExpertStatus


def _cli(db, *args):
    return subprocess.run(
        [sys.executable, '-m', 'robot_agent.releases', '--db', db, *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope='module')
def pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp('pairs')
    return {s: write_default_models(str(root / f'seed{s}'), seed=s) for s in (0, 1)}


def test_the_command_line_registers_lists_shows_and_refuses_with_reasons(pairs, tmp_path):
    db = str(tmp_path / 'r.db')
    p0, p1 = pairs[0], pairs[1]
    # the seeded pairs are not the shipped model's config: the kit's budgets and joints
    # come from config/wam.yaml, whose robot is the tabletop arm they were written for
    done = _cli(db, 'register', 'r0', '--world', p0['world_dir'], '--action', p0['action_dir'],
                '--reason', 'the first one')  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(_cli(db, '--json', 'list').stdout)
    assert [(r['name'], r['state']) for r in rows] == [('r0', 'registered')]
    shown = json.loads(_cli(db, '--json', 'show', 'r0').stdout)
    assert shown['world_version'] == 'default-seed0' and shown['robot_name'] == 'tabletop_arm'
    # a pair that does not go together: refused, with the reason, exit 1, nothing written
    bad = _cli(db, 'register', 'mixed', '--world', p1['world_dir'], '--action',
               p0['action_dir'], '--reason', 'x')  # fmt: skip
    assert bad.returncode == 1 and 'accepts world version' in bad.stderr
    assert 'mixed' not in _cli(db, 'list').stdout
    unknown = _cli(db, 'show', 'nope')
    assert unknown.returncode == 1 and "no release named 'nope'" in unknown.stderr
    usage = _cli(db, 'canary', 'r0')  # --robots and --reason missing
    assert usage.returncode == 2
    outside = _cli(db, 'canary', 'r0', '--robots', 'robot9', '--fleet', 'robot1',
                   '--reason', 'x')  # fmt: skip
    assert outside.returncode == 1 and 'robot9 not in it' in outside.stderr
    history = json.loads(_cli(db, '--json', 'history', 'r0').stdout)
    assert [(h['from_state'], h['to_state']) for h in history] == [(None, 'registered')]
    # promote needs a running stack: without one it says so, and nothing changes
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(201, 230))
    lonely = _cli(db, 'promote', 'r0', '--reason', 'x')
    assert lonely.returncode == 1 and 'is the stack running' in lonely.stderr
    assert json.loads(_cli(db, '--json', 'show', 'r0').stdout)['state'] == 'registered'


def test_a_release_name_becomes_a_parameter_overlay_for_the_bring_up(pairs, tmp_path):
    import yaml

    from robot_agent.releases import release_overlay
    from wam_core.common.robot import TABLETOP_ARM
    from wam_core.releases.registry import Registry

    db = str(tmp_path / 'r.db')
    with Registry(db) as reg:
        reg.register('r1', pairs[1]['world_dir'], pairs[1]['action_dir'], TABLETOP_ARM, 'x')
    doc = yaml.safe_load(open(release_overlay('r1', db, str(tmp_path))))
    assert doc['/**/world_expert']['ros__parameters'] == {
        'model_dir': os.path.abspath(pairs[1]['world_dir']),
        'release': 'r1',
        'releases_db': os.path.abspath(db),  # where a restarted one looks releases up
    }
    assert doc['/**/action_expert']['ros__parameters']['release'] == 'r1'


def test_the_drill_switches_rolls_back_and_stops_bad_canaries_safely():
    from wam_system_tests.releases_drill import run

    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    # A 150 ms TTL: this is about switching, and on a slow day this host's two-robot fleet
    # degrades 17-29 % of its ticks at the default TTL (stale, 2026-12-03), enough for the
    # canary's objectives to roll a good release back; `make releases` measures at auto.
    lines: list[str] = []  # the drill's log, shown when an assertion fails
    out = run(1, 8.0, log=lines.append, ttl_ms=150.0)
    s = out['summary']
    why = '\n'.join(lines)
    # the safety targets hold in every step
    assert s['mixed_version_ticks'] == 0
    assert s['unsafe_forwarded'] == 0
    assert s['safety_stops'] == 0, out['steps']
    # each switch reached both robots, the rollback was quick, and no load is left over
    # (a canary on robot1, then its promotion to robot2)
    switched = {r for x in out['steps'] if x['step'] == 'switch' for r in x['switch_ms']}
    assert switched == {'robot1', 'robot2'}, why
    assert s['rollback_ms']['p99'] < 1000
    # both bad canaries rolled back by themselves: the limit-seeker by an objective, the
    # rewritten directory at its load
    canaries = {x['step']: x for x in out['steps'] if x['step'].startswith('canary')}
    assert canaries['canary_limit']['rolled_back'] and 'rollback' in canaries['canary_limit']
    assert canaries['canary_tampered']['rolled_back']
    assert 'not the registered build' in canaries['canary_tampered']['reasons'][0]
    assert s['bad_canaries_rolled_back'] == 2


def test_a_registered_directory_rewritten_later_is_refused_by_the_expert(pairs, tmp_path):
    """The digest check an expert node makes before loading (no ROS needed to show it)."""
    import shutil

    from wam_core.models.manifest import ManifestError
    from wam_core.releases.registry import manifest_digest, verify_release_dir

    d = str(tmp_path / 'w')
    shutil.copytree(pairs[0]['world_dir'], d)
    digest = manifest_digest(d)
    m = read_manifest(d)
    write_manifest(d, m.name, 'rewritten', m.extra)
    with pytest.raises(ManifestError, match='not the registered build'):
        verify_release_dir(d, digest)


def test_a_bring_up_refuses_an_unknown_release_or_one_for_another_robot(tmp_path):
    from wam_core.common.robot import load_robot_description
    from wam_core.releases.registry import Registry
    from wam_system_tests.second_arm import write_description

    urdf = write_description(str(tmp_path / 'arm'))
    arm = load_robot_description(urdf)
    pair = write_default_models(str(tmp_path / 'second'), seed=0, robot=arm)
    db = str(tmp_path / 'r.db')
    with Registry(db) as reg:
        reg.register('other-arm', pair['world_dir'], pair['action_dir'], arm, 'x',
                     conformance=lambda *a: [])  # fmt: skip
    env = {**os.environ, 'WAM_RELEASES_DB': db}
    for args, why in (
        (['--release', 'nope'], "no release named 'nope'"),
        (['--release', 'other-arm'], "is for robot 'second_arm'"),
    ):
        done = subprocess.run(
            [sys.executable, '-m', 'robot_agent.fleet', '--robot', 'synthetic', *args],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        assert done.returncode == 2 and why in done.stderr, done.stderr[-500:]


def test_the_command_line_promotes_and_rolls_back_a_running_lone_robot(tmp_path):
    """promote and rollback through the CLI against a lone robot (root namespace, a
    process per node): the action expert serves the new release, the audit has it."""
    from robot_agent.releases import release_overlay
    from robot_agent.stack import Stack
    from wam_core.common.paths import default_config, resolve_path
    from wam_core.common.robot import TABLETOP_ARM
    from wam_core.releases.registry import LIVE, Registry
    from wam_system_tests.releases_drill import _perturb

    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    db = str(tmp_path / 'r.db')
    world, action = resolve_path('models/world_expert'), resolve_path('models/action_expert')
    wv = read_manifest(world).version
    _perturb(world, str(tmp_path / 'v2w'), 1, 1e-3, f'{wv}-v2')
    _perturb(action, str(tmp_path / 'v2a'), 2, 1e-3, f'{wv}-v2', {'world_version': f'{wv}-v2'})
    with Registry(db) as reg:
        reg.register('v1', world, action, TABLETOP_ARM, 'shipped', conformance=lambda *a: [])
        reg.register('v2', str(tmp_path / 'v2w'), str(tmp_path / 'v2a'), TABLETOP_ARM, 'next',
                     conformance=lambda *a: [])  # fmt: skip
        reg.transition('v1', LIVE, 'start')
    stack = Stack('multi', default_config(), overlays=[release_overlay('v1', db, str(tmp_path))])
    try:
        stack.wait_ready(90)
        assert stack.monitor.action.release == 'v1'
        proc = subprocess.Popen(
            [sys.executable, '-m', 'robot_agent.releases', '--db', db, '--json', 'promote',
             'v2', '--reason', 'test'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        stack.spin_for(90.0, until=lambda: proc.poll() is not None)
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err[-800:]
        assert json.loads(out)['live'] == 'v2'
        stack.spin_for(3.0, until=lambda: stack.monitor.action.release == 'v2')
        assert stack.monitor.action.release == 'v2'
        assert stack.monitor.world.model_version == f'{wv}-v2'
        assert not stack.monitor.safety_stop
        # Killed and restarted with the parameters it was launched with (release v1), the
        # world expert asks the action expert which release it serves, finds v2 in the
        # registry the overlay names and encodes with it: before, it came back on v1 and
        # the robot held on version_mismatch until someone restarted it with v2
        seen = []
        stack.monitor.create_subscription(
            WorldExpertStatus, '/world_expert/status',
            lambda msg: seen.append((time.monotonic(), msg.model_version)), 10,
        )  # fmt: skip
        stack.kill_child('world', signal.SIGKILL)
        t_restart = time.monotonic()
        stack.start_child('world')

        def back_on_v2():
            return any(t > t_restart and v == f'{wv}-v2' for t, v in seen)

        stack.spin_for(120.0, until=back_on_v2)
        assert back_on_v2(), seen[-3:]
        assert any(t > t_restart and v == wv for t, v in seen), 'it did start on v1'
        stack.spin_for(15.0, until=lambda: not stack.monitor.safety_stop)
        chunks = stack.monitor.action.chunks
        stack.spin_for(2.0)
        assert stack.monitor.action.chunks - chunks > 20, stack.monitor.action.message
        assert stack.monitor.action.release == 'v2' and not stack.monitor.safety_stop
        # The same for the action expert: restarted on v1, it asks the world expert which
        # release it encodes the robot with, loads v2's action expert and switches to it
        # (a switch in the new process: release_switches 1)
        actions = []
        stack.monitor.create_subscription(
            ActionExpertStatus, '/action_expert/status',
            lambda msg: actions.append((time.monotonic(), msg.release, msg.release_switches)),
            10,
        )  # fmt: skip
        stack.kill_child('action', signal.SIGKILL)
        t_restart = time.monotonic()
        stack.start_child('action')

        def action_on_v2():
            return any(t > t_restart and r == 'v2' and n == 1 for t, r, n in actions)

        stack.spin_for(120.0, until=action_on_v2)
        assert action_on_v2(), actions[-3:]
        stack.spin_for(15.0, until=lambda: not stack.monitor.safety_stop)
        chunks = stack.monitor.action.chunks
        stack.spin_for(2.0)
        assert stack.monitor.action.chunks - chunks > 20, stack.monitor.action.message
        assert stack.monitor.action.mixed_version_ticks == 0 and not stack.monitor.safety_stop
        proc = subprocess.Popen(
            [sys.executable, '-m', 'robot_agent.releases', '--db', db, 'rollback',
             '--reason', 'test'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        stack.spin_for(90.0, until=lambda: proc.poll() is not None)
        assert proc.wait(timeout=10) == 0, proc.stderr.read()[-800:]
        stack.spin_for(3.0, until=lambda: stack.monitor.action.release == 'v1')
        assert stack.monitor.action.release == 'v1' and not stack.monitor.safety_stop
        assert stack.monitor.action.mixed_version_ticks == 0
    finally:
        stack.shutdown()
    with Registry(db) as reg:
        assert [(h.release, h.to_state) for h in reg.history()][-3:] == [
            ('v2', 'live'),
            ('v2', 'rolled_back'),
            ('v1', 'live'),
        ]
