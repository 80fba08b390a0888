"""Where the policy misses, phase by phase: teacher-forced TCP error on demonstrations.

    python -m wam_learning.diagnose [--models models] [--data datasets/pick_place] [--episodes 12]

On held-out demonstration frames (every 20th episode, as training holds them out) the
experts get the recorded frame, joint state and the subtask of the expert's phase; the
TCP position of the predicted chunk's last point (forward kinematics of the sim's arm)
is compared with that of the expert's chunk, and so is the gripper target; the
object positions the action expert read off the frame are compared with the true ones. Teacher
forcing isolates imitation error from compounding: a phase missed by several
centimetres here is missed in closed loop too.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

import numpy as np

from wam_sim.tabletop import TcpKinematics


def _frames(episodes: list[dict], phases: list[str], every: int):
    """(episode, frame index, its tick, the expert's phase there) for every ``every``-th frame."""
    for ep in episodes:
        for f in range(0, len(ep['frame_tick']), every):
            t = int(ep['frame_tick'][f])
            yield ep, f, t, phases[int(ep['phase'][t])]


def phase_errors(
    predict: Callable, episodes: list[dict], phases: list[str], every: int = 3
) -> dict[str, dict]:
    """predict(image, joint_state, phase_name) -> chunk [H, 7] on every ``every``-th frame.
    Returns {phase: {'n', 'tcp_cm_mean', 'tcp_cm_p90', 'gripper_mm_mean'}} for the phases seen."""
    fk = TcpKinematics()
    tcp: dict[str, list] = {}
    grip: dict[str, list] = {}
    for ep, f, t, name in _frames(episodes, phases, every):
        pred = np.asarray(predict(ep['images'][f], ep['joint_positions'][t], name))
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
    estimate: Callable, episodes: list[dict], phases: list[str], every: int = 3
) -> dict[str, dict]:
    """estimate(image) -> apple xyz, fridge xy [5] (m, base frame) on every ``every``-th frame.
    Returns {phase: {'apple_cm_mean', 'fridge_cm_mean'}}: how well the world expert sees."""
    apple: dict[str, list] = {}
    fridge: dict[str, list] = {}
    for ep, f, t, name in _frames(episodes, phases, every):
        est = np.asarray(estimate(ep['images'][f]))
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
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, min(os.cpu_count() or 1, 4)))
    policy = Policy(
        os.path.join(args.models, 'world_expert'),
        os.path.join(args.models, 'action_expert'),
        precision='fp32',
    )
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

    result = phase_errors(predict, held_out, manifest['phases'])
    seen = object_errors(estimate, held_out, manifest['phases'])
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
