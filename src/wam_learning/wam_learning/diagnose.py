"""Where the policy misses, phase by phase: teacher-forced TCP error on demonstrations.

    python -m wam_learning.diagnose [--models models] [--data datasets/pick_place] [--episodes 12]

On held-out demonstration frames (every 20th episode, as training holds them out) the
experts get the recorded frame, joint state and the subtask of the expert's phase; the
TCP position of the predicted chunk's last point (forward kinematics of the sim's arm)
is compared with that of the expert's chunk, and so is the gripper target; the
object positions the action expert read off the frame are compared with the true ones. Teacher
forcing isolates imitation error from compounding: a phase missed by several
centimetres here is missed in closed loop too.

    python -m wam_learning.diagnose --seeds 5000-5049 [--models models] [--json out.json]

On held-out evaluation seeds instead (no dataset needed): the scripted expert drives
each episode and the world expert sees every view it needs on every other tick; the
apple-position error of what the action expert reads is reported on the first frame
and while reaching (the reach and descend phases, where the arm can hide the apple
from the front camera), overall and per seed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

import numpy as np

from wam_sim.tabletop import TABLE_Z, TcpKinematics

REACHING = ('reach', 'descend')


def observation(ep: dict, f: int, views) -> object:
    """Frame ``f`` of a recorded episode as the world expert's observation."""
    from wam_core.models.contract import Observation

    return Observation(
        {v: ep['images'][f] if i == 0 else ep[f'images_{v}'][f] for i, v in enumerate(views)}
    )


def held_out_object_errors(policy, seeds, render_every: int = 2) -> dict:
    """Apple-position error (cm) of the world expert's estimate on held-out seeds, the
    scripted expert driving: {'first_frame': {...}, 'reaching': {...}, 'per_seed': {seed:
    {'first_frame_cm', 'reaching_cm_mean', 'reaching_cm_max'}}}."""
    import torch

    from wam_sim.scripted_expert import run_episode
    from wam_sim.tabletop import TabletopSim

    sim = TabletopSim()
    first, reaching, per_seed = [], [], {}

    for seed in seeds:
        errs: list[tuple[str, float]] = []
        tick = [0]

        @torch.inference_mode()
        def on_tick(s, phase, chunk, errs=errs, tick=tick):
            if tick[0] % render_every == 0:
                est = policy.encode(policy.observe(s)).objects[0].float().numpy()
                truth = s.body_position('apple') - [0.0, 0.0, TABLE_Z]
                errs.append((phase, 100 * float(np.linalg.norm(est[:3] - truth))))
            tick[0] += 1

        run_episode(sim, seed, noise=0.0, on_tick=on_tick)
        reach = [e for p, e in errs if p in REACHING]
        first.append(errs[0][1])
        reaching += reach
        per_seed[int(seed)] = {
            'first_frame_cm': round(errs[0][1], 2),
            'reaching_cm_mean': round(float(np.mean(reach)), 2) if reach else None,
            'reaching_cm_max': round(float(np.max(reach)), 2) if reach else None,
        }
    sim.close()

    def summary(x):
        return {
            'n': len(x),
            'mean_cm': round(float(np.mean(x)), 2),
            'p90_cm': round(float(np.percentile(x, 90)), 2),
            'max_cm': round(float(np.max(x)), 2),
        }

    return {'first_frame': summary(first), 'reaching': summary(reaching), 'per_seed': per_seed}


def _seed_range(text: str) -> list[int]:
    lo, _, hi = text.partition('-')
    return list(range(int(lo), int(hi or lo) + 1))


def _frames(episodes: list[dict], phases: list[str], every: int):
    """(episode, frame index, its tick, the expert's phase there) for every ``every``-th frame."""
    for ep in episodes:
        for f in range(0, len(ep['frame_tick']), every):
            t = int(ep['frame_tick'][f])
            yield ep, f, t, phases[int(ep['phase'][t])]


def phase_errors(
    predict: Callable,
    episodes: list[dict],
    phases: list[str],
    every: int = 3,
    views=('front',),
) -> dict[str, dict]:
    """predict(observation, joint_state, phase_name) -> chunk [H, 7] on every ``every``-th
    frame.
    Returns {phase: {'n', 'tcp_cm_mean', 'tcp_cm_p90', 'gripper_mm_mean'}} for the phases seen."""
    fk = TcpKinematics()
    tcp: dict[str, list] = {}
    grip: dict[str, list] = {}
    for ep, f, t, name in _frames(episodes, phases, every):
        pred = np.asarray(predict(observation(ep, f, views), ep['joint_positions'][t], name))
        label = ep['chunks'][t]
        tcp.setdefault(name, []).append(np.linalg.norm(fk(pred[-1]) - fk(label[-1])))
        grip.setdefault(name, []).append(abs(pred[-1, 6] - label[-1, 6]))
    return {
        p: {
            'n': len(tcp[p]),
            'tcp_cm_mean': 100 * float(np.mean(tcp[p])),
            'tcp_cm_p90': 100 * float(np.percentile(tcp[p], 90)),
            'gripper_mm_mean': 1000 * float(np.mean(grip[p])),
        }
        for p in phases
        if p in tcp
    }


def object_errors(
    estimate: Callable,
    episodes: list[dict],
    phases: list[str],
    every: int = 3,
    views=('front',),
) -> dict[str, dict]:
    """estimate(observation) -> apple xyz, fridge xy [5] (m, base frame) on every
    ``every``-th frame.
    Returns {phase: {'apple_cm_mean', 'fridge_cm_mean'}}: how well the world expert sees."""
    apple: dict[str, list] = {}
    fridge: dict[str, list] = {}
    for ep, f, t, name in _frames(episodes, phases, every):
        est = np.asarray(estimate(observation(ep, f, views)))
        apple.setdefault(name, []).append(np.linalg.norm(est[:3] - ep['apple'][t]))
        fridge.setdefault(name, []).append(np.linalg.norm(est[3:5] - ep['fridge']))
    return {
        p: {
            'apple_cm_mean': 100 * float(np.mean(apple[p])),
            'fridge_cm_mean': 100 * float(np.mean(fridge[p])),
        }
        for p in phases
        if p in apple
    }


def main(argv=None) -> int:
    import torch

    from .dataset import load
    from .evaluate import Policy
    from .train import embed_texts, plan_texts

    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--models', default='models')
    ap.add_argument('--data', default='datasets/pick_place')
    ap.add_argument('--episodes', type=int, default=12, help='held-out episodes to score')
    ap.add_argument(
        '--seeds', default='', help='e.g. 5000-5049: object errors on held-out seeds instead'
    )
    ap.add_argument('--json', default='', help='with --seeds: also write the figures here')
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, min(os.cpu_count() or 1, 4)))
    policy = Policy(
        os.path.join(args.models, 'world_expert'),
        os.path.join(args.models, 'action_expert'),
        precision='fp32',
    )
    views = policy.world.spec.view_names
    if args.seeds:
        from tqdm import tqdm

        seeds = _seed_range(args.seeds)
        res = held_out_object_errors(policy, tqdm(seeds, desc='held-out seeds', unit='ep'))
        res = dict(res, version=policy.world.version, views=list(views))
        print(f'{policy.world.version} (views {list(views)}): apple error on held-out seeds')
        for key in ('first_frame', 'reaching'):
            r = res[key]
            print(
                f'  {key:12} n={r["n"]:>5}  mean {r["mean_cm"]:.2f} cm  p90 {r["p90_cm"]:.2f}'
                f'  max {r["max_cm"]:.2f}'
            )
        for seed in (5000, 5026, 5039):
            if seed in res['per_seed']:
                print(f'  seed {seed}: {res["per_seed"][seed]}')
        if args.json:
            import json

            with open(args.json, 'w', encoding='utf-8') as fh:
                json.dump(res, fh, indent=1)
        return 0
    manifest, episodes = load(args.data)
    held_out = [e for i, e in enumerate(episodes) if i % 20 == 19][: args.episodes] or episodes[
        : args.episodes
    ]
    skills = plan_texts()
    vectors = dict(zip(skills, embed_texts(list(skills.values())), strict=True))

    @torch.inference_mode()
    def predict(image, q, phase):
        sub = torch.from_numpy(vectors[manifest['phase_skill'][phase]])[None].to(policy.dtype)
        joint = torch.from_numpy(np.asarray(q, dtype=np.float32))[None].to(policy.dtype)
        return policy.action.decode(policy.encode(image), joint, sub)[0].float().numpy()

    @torch.inference_mode()
    def estimate(image):
        return policy.encode(image).objects[0].float().numpy()

    result = phase_errors(predict, held_out, manifest['phases'], views=views)
    seen = object_errors(estimate, held_out, manifest['phases'], views=views)
    print(f'{policy.world.version}: {len(held_out)} held-out episodes, teacher-forced')
    print(
        f'{"phase":10}{"frames":>8}{"TCP cm":>9}{"p90":>7}{"gripper mm":>12}{"apple cm":>10}'
        f'{"fridge cm":>11}'
    )
    for p, r in result.items():
        print(
            f'{p:10}{r["n"]:>8}{r["tcp_cm_mean"]:>9.2f}{r["tcp_cm_p90"]:>7.2f}{r["gripper_mm_mean"]:>12.1f}'
            f'{seen[p]["apple_cm_mean"]:>10.2f}{seen[p]["fridge_cm_mean"]:>11.2f}'
        )
    return 0


if __name__ == '__main__':
    sys.exit(main())
