"""Demonstration dataset: seeded episodes of the scripted expert in the tabletop sim.

    python -m wam_learning.dataset --out datasets/pick_place --episodes 300

Per episode (one compressed .npz): camera frames of every view the sim has (rgb8,
every ``render_every`` control ticks, like a ~25-30 Hz camera against a 50 Hz
controller; ``images`` is the front camera, ``images_<view>`` each other view, with
``pixels_<view>`` the apple's and fridge's centres in that view, NaN where out of
it, dense labels for the moving wrist camera), and per tick
the joint positions, the expert's action chunk [H, 7] (targets k periods ahead),
its phase, the subtask text of that phase, and the object positions (auxiliary
targets for training the world expert). ``manifest.json`` lists the episodes with
their sha256, seeds and settings. Half the episodes carry execution noise (the
labels stay the expert's), so the data shows how to recover from errors.
Only successful episodes are kept; failures are counted in the manifest.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from wam_core.models.manifest import sha256_file
from wam_sim.scripted_expert import PHASE_SKILL, run_episode
from wam_sim.tabletop import CAMERAS, TABLE_Z, TabletopSim

PHASES = list(PHASE_SKILL)
VIEWS = list(CAMERAS)  # recorded views; the first is the front camera (key ``images``)
TRAIN_FIRST_SEED = 0  # training episodes: seeds 0..N-1; held-out evaluation uses EVAL_FIRST_SEED+
EVAL_FIRST_SEED = 5000


def record_episode(
    sim: TabletopSim, seed: int, noise: float, render_every: int = 2, driver_factory=None
) -> dict[str, np.ndarray]:
    frames: dict[str, list[np.ndarray]] = {v: [] for v in VIEWS}
    view_px: dict[str, list[np.ndarray]] = {v: [] for v in VIEWS[1:]}
    frame_tick: list[int] = []
    q, chunks, phases, apple = [], [], [], []

    def on_tick(s: TabletopSim, phase: str, chunk: np.ndarray) -> None:
        tick = len(q)
        if tick % render_every == 0:
            for v in VIEWS:
                frames[v].append(s.render(v))
            for v in VIEWS[1:]:
                view_px[v].append(s.object_pixels(v))
            frame_tick.append(tick)
        q.append(s.joint_positions())
        chunks.append(chunk)
        phases.append(PHASES.index(phase))
        apple.append(s.body_position('apple') - [0.0, 0.0, TABLE_Z])

    driver = driver_factory(seed) if driver_factory is not None else None
    ok, seconds = run_episode(sim, seed, noise=noise, on_tick=on_tick, driver=driver)
    views = {'images': np.stack(frames[VIEWS[0]])}
    for v in VIEWS[1:]:
        views[f'images_{v}'] = np.stack(frames[v])
        views[f'pixels_{v}'] = np.array(view_px[v], dtype=np.float32)
    return {
        'success': np.array(ok),
        'seconds': np.array(seconds),
        'seed': np.array(seed),
        'noise': np.array(noise),
        **views,
        'frame_tick': np.array(frame_tick, dtype=np.int32),
        'joint_positions': np.array(q, dtype=np.float32),
        'chunks': np.array(chunks, dtype=np.float32),
        'phase': np.array(phases, dtype=np.int8),
        'apple': np.array(apple, dtype=np.float32),
        'fridge': (sim.body_position('fridge')[:2]).astype(np.float32),
    }


def record(
    out: str,
    episodes: int,
    first_seed: int = TRAIN_FIRST_SEED,
    noise: float = 0.02,
    render_every: int = 2,
    progress: bool = True,
    driver_factory=None,
    keep_failed: bool = False,
    kind: str = 'wam-pick-place-demos',
) -> dict:
    from tqdm import tqdm

    os.makedirs(out, exist_ok=True)
    sim = TabletopSim()
    entries, failed = [], []
    t0 = time.perf_counter()
    bar = tqdm(range(episodes), desc='recording', unit='ep', disable=not progress, file=sys.stderr)
    for i in bar:
        seed = first_seed + i
        ep_noise = noise if i % 2 else 0.0
        ep = record_episode(sim, seed, ep_noise, render_every, driver_factory)
        if not bool(ep['success']):
            failed.append(seed)
            if not keep_failed:  # on-policy (DAgger) episodes keep their expert labels either way
                continue
        path = os.path.join(out, f'episode_{seed:05d}.npz')
        np.savez_compressed(path, **ep)
        entries.append(
            {
                'file': os.path.basename(path),
                'seed': seed,
                'noise': ep_noise,
                'ticks': int(len(ep['chunks'])),
                'frames': int(len(ep['images'])),
                'seconds': float(ep['seconds']),
                'sha256': sha256_file(path),
            }
        )
        bar.set_postfix(kept=len(entries), failed=len(failed))
    sim.close()
    manifest = {
        'kind': kind,
        'episodes': entries,
        'failed_seeds': failed,
        'phases': PHASES,
        'phase_skill': PHASE_SKILL,
        'render_every': render_every,
        'views': VIEWS,
        'period_s': 0.02,
        'chunk': 16,
        'noise': noise,
        'first_seed': first_seed,
        'seconds_to_record': round(time.perf_counter() - t0, 1),
    }
    with open(os.path.join(out, 'manifest.json'), 'w', encoding='utf-8') as fh:
        json.dump(manifest, fh, indent=1)
    return manifest


def load(out: str, verify: bool = True) -> tuple:
    """(manifest, [episode dicts]); refuses files whose sha256 differs from the manifest."""
    path = os.path.join(out, 'manifest.json')
    if not os.path.exists(path):
        raise FileNotFoundError(f'no dataset at {out} (run `make data` first)')
    with open(path, encoding='utf-8') as fh:
        manifest = json.load(fh)
    episodes = []
    for e in manifest['episodes']:
        f = os.path.join(out, e['file'])
        if verify and sha256_file(f) != e['sha256']:
            raise ValueError(f'{f}: sha256 differs from the dataset manifest')
        with np.load(f, allow_pickle=False) as z:
            episodes.append({k: z[k] for k in z.files})
    return manifest, episodes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--out', default='datasets/pick_place')
    ap.add_argument('--episodes', type=int, default=300)
    ap.add_argument('--first-seed', type=int, default=TRAIN_FIRST_SEED)
    ap.add_argument(
        '--noise', type=float, default=0.02, help='execution noise (rad) on every other episode'
    )
    args = ap.parse_args(argv)
    m = record(args.out, args.episodes, args.first_seed, args.noise)
    frames = sum(e['frames'] for e in m['episodes'])
    print(
        f'dataset {args.out}: {len(m["episodes"])} episodes kept, '
        f'{len(m["failed_seeds"])} failed, '
        f'{frames} frames, {m["seconds_to_record"]} s'
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
