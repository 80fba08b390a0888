"""MuJoCo tabletop: determinism, joint-trajectory semantics, safety freeze."""

import numpy as np
import pytest

from wam_sim.tabletop import HOME, JOINT_NAMES, TabletopSim


@pytest.fixture(scope='module')
def sim():
    s = TabletopSim(seed=0)
    yield s
    s.close()


def _target(delta):
    q = HOME.copy()
    q[0] += delta
    return q


def test_same_seed_same_episode_and_other_seeds_differ(sim):
    a = TabletopSim(seed=7, render=True)
    b = TabletopSim(seed=7, render=True)
    for s in (a, b):
        s.command(JOINT_NAMES, [_target(0.3), _target(0.5)], [0.2, 0.4])
        s.step(0.5)
    assert np.array_equal(a.data.qpos, b.data.qpos)
    assert np.array_equal(a.render(), b.render())
    c = TabletopSim(seed=8, render=False)
    assert not np.allclose(c.body_position('apple'), a.body_position('apple'))
    for s in (a, b, c):
        s.close()


def test_points_are_interpolated_in_time(sim):
    sim.reset(0)
    sim.command(JOINT_NAMES, [_target(0.4)], [0.4])
    sim.step(0.2)
    assert sim.setpoint[0] == pytest.approx(0.2, abs=0.01)  # halfway at half time
    sim.step(0.3)
    assert sim.setpoint[0] == pytest.approx(0.4, abs=1e-9)  # holds the last point
    sim.step(0.5)
    assert sim.joint_positions()[0] == pytest.approx(0.4, abs=0.02)  # and the arm got there


def test_new_trajectory_replaces_the_old_from_its_start_time(sim):
    sim.reset(0)
    sim.command(JOINT_NAMES, [_target(0.5)], [1.0])
    sim.step(0.2)
    start = sim.time + 0.2
    sim.command(JOINT_NAMES, [_target(-0.2)], [0.2], start_time=start)
    sim.step(0.1)
    assert sim.setpoint[0] > 0.1  # old one still runs before the new start
    sim.step(0.1 + 0.2 + 0.01)
    assert sim.setpoint[0] == pytest.approx(-0.2, abs=1e-9)


def test_points_already_past_are_skipped(sim):
    sim.reset(0)
    sim.step(0.5)
    past_start = sim.time - 0.3
    # points at -0.2 s and -0.1 s relative to now are skipped; the one at +0.2 s is used
    sim.command(
        JOINT_NAMES,
        [_target(5.0), _target(5.0), _target(0.3)],
        [0.1, 0.2, 0.5],
        start_time=past_start,
    )
    sim.step(0.1)
    assert 0.0 < sim.setpoint[0] < 0.3
    sim.step(0.15)
    assert sim.setpoint[0] == pytest.approx(0.3, abs=1e-9)


def test_stop_freezes_the_arm(sim):
    sim.reset(0)
    sim.command(JOINT_NAMES, [_target(1.0)], [0.5])
    sim.step(0.2)
    sim.set_stop(True)
    frozen = sim.joint_positions()
    sim.command(JOINT_NAMES, [_target(-1.0)], [0.1])  # ignored while stopped
    sim.step(0.5)
    assert np.allclose(sim.joint_positions(), frozen, atol=0.02)
    sim.set_stop(False)
    sim.command(JOINT_NAMES, [_target(0.0)], [0.2])
    sim.step(0.6)
    assert sim.joint_positions()[0] == pytest.approx(0.0, abs=0.02)


def test_joint_order_is_mapped_and_unknown_joints_refused(sim):
    sim.reset(0)
    names = JOINT_NAMES[::-1]
    sim.command(names, [_target(0.3)[::-1]], [0.1])
    sim.step(0.15)
    assert sim.setpoint[0] == pytest.approx(0.3)
    with pytest.raises(ValueError):
        sim.command(JOINT_NAMES[:6] + ['bogus'], [_target(0.0)], [0.1])


def test_camera_is_rgb_128(sim):
    img = sim.render()
    assert img.shape == (128, 128, 3) and img.dtype == np.uint8 and img.std() > 10
    assert not sim.success()


def test_camera_pixels_finds_the_red_apple_in_the_render():
    from wam_sim.tabletop import camera_pixels

    for seed in (0, 7, 42):
        sim = TabletopSim(seed)
        img = sim.render().astype(int)
        red = (img[..., 0] > 150) & (img[..., 1] < 80) & (img[..., 2] < 80)
        rows, cols = np.nonzero(red)
        assert len(rows) > 3
        col, row = camera_pixels(sim.body_position('apple'))
        # the visible faces (the top one mostly) sit a little above the centre of the cube
        assert abs(col - cols.mean()) < 2.0 and abs(row - rows.mean()) < 3.5, (
            seed,
            col,
            row,
            cols.mean(),
            rows.mean(),
        )
        sim.close()


def test_renders_without_helper_threads_unless_asked():
    """Without a GPU, Mesa's llvmpipe would render on one helper thread per core; the
    simulator keeps rendering on the calling thread (a user's LP_NUM_THREADS still wins)."""
    import os
    import subprocess
    import sys

    # the child names the OpenGL renderer it got (glGetString(GL_RENDERER) on the
    # renderer's context), so the helper-thread count is judged against the driver:
    # llvmpipe starts the asked number, a GPU driver none
    probe = (
        'import ctypes, glob, os\n'
        'from wam_sim.tabletop import TabletopSim\n'
        'sim = TabletopSim()\n'
        "sim.render('front')\n"
        "names = [open(f).read().strip() for f in glob.glob('/proc/self/task/*/comm')]\n"
        'sim._renderer._gl_context.make_current()\n'
        "gl = ctypes.CDLL('libOpenGL.so.0')\n"
        'gl.glGetString.restype = ctypes.c_char_p\n'
        'renderer = gl.glGetString(0x1F01).decode().split()[0]\n'
        'sim.close()\n'
        "helpers = sum(n.startswith('llvmpipe') for n in names)\n"
        "print(os.environ.get('LP_NUM_THREADS', 'unset'), helpers, renderer)\n"
    )

    def run(env_value):
        env = {k: v for k, v in os.environ.items() if k != 'LP_NUM_THREADS'}
        if env_value is not None:
            env['LP_NUM_THREADS'] = env_value
        out = subprocess.run(
            [sys.executable, '-c', probe], env=env, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        setting, threads, renderer = out.stdout.strip().splitlines()[-1].split()
        return setting, int(threads), renderer

    # the setting itself too: on a one-core host llvmpipe starts no helper either way
    setting, threads, renderer = run(None)
    assert (setting, threads) == ('0', 0)
    setting, threads, _ = run('2')
    assert setting == '2'
    assert threads == (2 if renderer == 'llvmpipe' else 0), renderer
