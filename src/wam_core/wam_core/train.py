"""Behaviour cloning: train the world expert (ViT) and the action expert jointly.

    python -m wam_core.train --data datasets/pick_place --out models [--steps 3000] [--seed 0]

The loss is an L1 over the whole action chunk (as in ACT), expressed as targets
relative to the current joint positions, plus two auxiliary losses that teach a
from-scratch ViT where things are: the CLS token regresses the apple and fridge
positions, and every patch token says whether the apple's (the fridge's) centre falls
in its patch and where inside it (a cross-entropy over the patches and an offset L1,
as in CenterNet). Dense labels locate a 5-pixel cube far faster than the global
regression alone, which left the policy blind to where the apple is. The random scenes
that feed those losses also carry the scripted expert's chunk for their state, so the
action expert sees thousands of apple positions, not the demonstrations' few hundred.
Each sampled frame is paired with the joint states of the next few ticks, as in
serving, where a representation is reused by the ticks that follow its frame. The subtask input is the embedding of
the expert's current skill half the time and of another subtask of the plan (or
none) otherwise: the harness advances subtasks on a timer, so the policy must not
depend on the subtask being exact.

Deterministic given the seed and thread count. Writes both experts with manifests
into ``out`` (replacing the defaults), a reference sample for the load test, the
loss log (CSV) and a loss-curve PNG under ``out/training``.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import sys
import time
from typing import Dict, List, Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import ViTModel

from .action_expert import ActionExpert, ActionExpertConfig, default_delta_scale
from .dataset import load as load_dataset
from .default_models import ACTION_NAME, WORLD_NAME
from .manifest import read_manifest, sha256_file, write_manifest
from .sim import JOINT_NAMES, TABLE_Z, camera_pixels
from .world_expert import default_world_config

DEFAULT_INSTRUCTION = 'put the red apple in the fridge'
GRIPPER_WEIGHT = 10.0         # the gripper moves ~0.04 m where arm joints move ~0.4 rad
AUX_WEIGHT = 0.5
PATCH_WEIGHT = 0.1            # the patch cross-entropy starts at 2 x ln(64) = 8.3
STATE_LAG_TICKS = 4           # a representation serves the ticks up to ~80 ms after its frame


def plan_texts(instruction: str = DEFAULT_INSTRUCTION) -> Dict[str, str]:
    from .planner_rules import RulePlanner
    return {s.skill: s.text() for s in RulePlanner().plan(instruction).subtasks}


def embed_texts(texts: List[str]) -> np.ndarray:
    from .embedding import SubtaskEmbedder
    emb = SubtaskEmbedder()
    return np.stack([emb.embed(t) for t in texts]).astype(np.float32)


class RandomScenes:
    """Freshly rendered random scenes (objects from a new seed, the arm in a random pose),
    labelled with the object positions and with the scripted expert's chunk for that state.

    The position labels teach the world expert where things are instead of which of the
    few hundred demonstration scenes it is looking at (which it otherwise memorises).
    The chunk labels show the action expert thousands of apple positions instead of the
    demonstrations' few hundred: cloned from those alone, the policy reached 5 cm wide of
    an unseen apple. Half the poses put the TCP around and above the apple (the
    approach and grasp states), half are anywhere near the home pose."""

    def __init__(self, seed: int):
        from .scripted_expert import ScriptedExpert
        from .sim import HOME, TabletopSim
        self.sim = TabletopSim()
        self.expert = ScriptedExpert(self.sim)
        self.home = HOME
        self.rng = np.random.default_rng(seed)
        self.next_seed = 1_000_000 + 10_000 * seed

    def _pose(self, near_apple: bool) -> np.ndarray:
        from .scripted_expert import GRASP_Z, solve_ik
        sim, rng = self.sim, self.rng
        q = self.home.copy()
        if near_apple:
            apple = sim.body_position('apple')
            r, a = rng.uniform(0.0, 0.05), rng.uniform(-np.pi, np.pi)     # denser near the apple
            target = [apple[0] + r * np.cos(a), apple[1] + r * np.sin(a), GRASP_Z + rng.uniform(0.0, 0.14)]
            yaw = np.arctan2(apple[1], apple[0]) + rng.uniform(-0.3, 0.3)
            # via a point above: from the home pose, a low target can trap the IK in a fold
            q[:6] = solve_ik(sim, [target[0], target[1], GRASP_Z + 0.16], yaw, q)
            q[:6] = solve_ik(sim, target, yaw, q)
            # open or closing; a grip between these near the apple means "holding it"
            q[6] = rng.uniform(0.023, 0.04) if rng.random() < 0.8 else rng.uniform(0.0, 0.008)
        else:
            q[:4] += rng.uniform(-0.6, 0.6, 4)
            q[6] = rng.uniform(0.0, 0.04)
        return q

    def sample(self, n: int):
        """(images [n,S,S,3] uint8, positions [n,5], joint states [n,7], chunks [n,H,7], phase indices [n])."""
        import mujoco
        from .dataset import PHASES
        images, aux, qs, chunks, phases = [], [], [], [], []
        sim = self.sim
        for i in range(n):
            sim.reset(self.next_seed)
            self.next_seed += 1
            q = self._pose(near_apple=bool(i % 2))
            for a, v in zip(sim._qadr, q):
                sim.data.qpos[a] = v
            mujoco.mj_forward(sim.model, sim.data)
            name, chunk = self.expert.act()
            images.append(sim.render())
            aux.append(np.concatenate([sim.body_position('apple') - [0, 0, TABLE_Z], sim.body_position('fridge')[:2]]))
            qs.append(sim.joint_positions())
            chunks.append(chunk)
            phases.append(PHASES.index(name))
        t = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float32))  # noqa: E731
        return torch.from_numpy(np.stack(images)), t(aux), t(qs), t(chunks), np.array(phases)


class Batches:
    """Samples (frame, following joint state, chunk, subtask, aux target) from episodes in memory."""

    def __init__(self, episodes: List[dict], phase_skill: Dict[str, str], phases: List[str],
                 skill_text: Dict[str, str], subtask_vectors: Dict[str, np.ndarray], seed: int):
        self.rng = np.random.default_rng(seed)
        self.images = torch.from_numpy(np.concatenate([e['images'] for e in episodes]))      # [F,S,S,3] uint8
        self.frame_ep = np.concatenate([np.full(len(e['images']), i) for i, e in enumerate(episodes)])
        self.frame_tick = np.concatenate([e['frame_tick'] for e in episodes])
        self.episodes = episodes
        texts = list(skill_text.values())
        self.vectors = np.stack([subtask_vectors[t] for t in texts] + [np.zeros_like(subtask_vectors[texts[0]])])
        text_index = {t: i for i, t in enumerate(texts)}
        self.phase_vec = np.array([text_index[skill_text[phase_skill[p]]] for p in phases])

    def __len__(self) -> int:
        return len(self.frame_ep)

    def sample(self, batch: int, per_frame: int):
        f = self.rng.integers(0, len(self), batch)
        images = self.images[torch.from_numpy(f)]
        q, chunk, sub, aux = [], [], [], []
        for fi in f:
            ep = self.episodes[self.frame_ep[fi]]
            t_last = len(ep['chunks']) - 1
            aux.append(np.concatenate([ep['apple'][self.frame_tick[fi]], ep['fridge']]))
            for _ in range(per_frame):
                j = min(int(self.frame_tick[fi]) + int(self.rng.integers(0, STATE_LAG_TICKS)), t_last)
                q.append(ep['joint_positions'][j])
                chunk.append(ep['chunks'][j])
                sub.append(ep['phase'][j])
        t = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float32))  # noqa: E731
        return images, t(q), t(chunk), self.subtasks(sub), t(aux)

    def subtasks(self, phases) -> torch.Tensor:
        """Subtask vectors for expert phases: the phase's own half the time, else another
        subtask of the plan or none."""
        idx = [self.phase_vec[p] if self.rng.random() < 0.5 else self.rng.integers(0, len(self.vectors))
               for p in phases]
        return torch.from_numpy(self.vectors[np.array(idx)].astype(np.float32))


def pixels(images_u8: torch.Tensor) -> torch.Tensor:
    """[B,S,S,3] uint8 -> normalised [B,3,S,S], as ``image.Preprocessor`` does for one frame."""
    return images_u8.permute(0, 3, 1, 2).float() * (2.0 / 255.0) - 1.0


class Policy(nn.Module):
    def __init__(self, world: ViTModel, action: ActionExpert):
        super().__init__()
        self.world, self.action = world, action
        self.aux = nn.Linear(world.config.hidden_size, 5)     # apple xyz, fridge xy (training only)
        # per patch: apple and fridge "centre here" logits, then their (col, row) offsets in the patch
        self.patch_head = nn.Linear(world.config.hidden_size, 6)

    def forward(self, images_u8, q, subtask, per_frame: int, extra_u8=None, extra_q=None, extra_subtask=None):
        """Chunks for images_u8 (each with per_frame joint states) followed by those for
        extra_u8 (one joint state each, when given); aux positions and patch outputs for
        images_u8 followed by extra_u8 (the random scenes)."""
        n = images_u8.shape[0]
        both = images_u8 if extra_u8 is None else torch.cat([images_u8, extra_u8])
        rep = self.world(pixel_values=pixels(both)).last_hidden_state
        aux = self.aux(rep[:, 0])
        patches = self.patch_head(rep[:, 1:])
        pred = self.action(rep[:n].repeat_interleave(per_frame, 0), q, subtask)
        if extra_q is not None:
            pred = torch.cat([pred, self.action(rep[n:], extra_q, extra_subtask)])
        return pred, aux, patches


def patch_targets(aux_target: torch.Tensor, image_size: int, patch: int):
    """Object positions [B,5] (apple xyz above the table, fridge xy) -> the patch holding each
    centre [B,2] and the centre's offset inside it [B,2,2] (col, row in 0..1)."""
    a = aux_target.detach().numpy().astype(np.float64)
    apple = a[:, :3] + [0.0, 0.0, TABLE_Z]
    fridge = np.concatenate([a[:, 3:5], np.full((len(a), 1), TABLE_Z + 0.03)], axis=1)
    px = camera_pixels(np.stack([apple, fridge], axis=1), image_size) / patch      # [B,2,2] in patches
    grid = image_size // patch
    cell = np.clip(np.floor(px), 0, grid - 1)
    index = (cell[..., 1] * grid + cell[..., 0]).astype(np.int64)
    offset = np.clip(px - cell, 0.0, 1.0)
    return torch.from_numpy(index), torch.from_numpy(offset.astype(np.float32))


def patch_loss(patches: torch.Tensor, index: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    b = torch.arange(patches.shape[0])
    ce = F.cross_entropy(patches[..., 0], index[:, 0]) + F.cross_entropy(patches[..., 1], index[:, 1])
    off = torch.stack([patches[b, index[:, 0], 2:4], patches[b, index[:, 1], 4:6]], dim=1)
    return ce + (off - offset).abs().mean()


def apple_pixel_error(patches: torch.Tensor, index: torch.Tensor, offset: torch.Tensor, patch: int) -> float:
    """Mean distance (pixels) between the predicted and true apple centre."""
    grid = int(round(patches.shape[1] ** 0.5))
    b = torch.arange(patches.shape[0])
    k = patches[..., 0].argmax(dim=1)
    pred = torch.stack([k % grid, k // grid], dim=1).float() + patches[b, k, 2:4]
    true = torch.stack([index[:, 0] % grid, index[:, 0] // grid], dim=1).float() + offset[:, 0]
    return float((pred - true).norm(dim=1).mean() * patch)


def losses(pred, chunk, aux_pred, aux_target):
    w = torch.ones(pred.shape[-1])
    w[-1] = GRIPPER_WEIGHT
    act = ((pred - chunk).abs() * w).mean()
    aux = (aux_pred - aux_target).abs().mean() * 10.0        # metres -> ~decimetres
    return act, aux


def load_datasets(data: str, max_episodes: Optional[int] = None) -> tuple:
    """'a,b' -> (the first manifest, with every dataset's episodes listed, [episodes]).
    Later datasets (DAgger rounds) are drawn twice as often: they are few and they hold
    the states the policy actually gets into."""
    paths = [p for p in data.split(',') if p]
    manifest, episodes = load_dataset(paths[0])
    if max_episodes:
        episodes = episodes[:max_episodes]
    manifest = dict(manifest, episodes=list(manifest['episodes']))
    for path in paths[1:]:
        m, eps = load_dataset(path)
        if m['phases'] != manifest['phases']:
            raise ValueError(f'{path}: phases {m["phases"]} differ from {paths[0]}')
        manifest['episodes'] += m['episodes']
        episodes += eps + eps
    return manifest, episodes


def train(data: str, out: str, steps: int = 2100, batch: int = 24, per_frame: int = 4, lr: float = 1e-3,
          seed: int = 0, progress: bool = True, log_every: int = 25, val_every: int = 250,
          max_episodes: Optional[int] = None, scenes: int = 16, init: str = '') -> dict:
    from tqdm import tqdm
    torch.manual_seed(seed)
    np.random.seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    manifest, episodes = load_datasets(data, max_episodes)
    if len(episodes) < 2:
        raise ValueError(f'{data}: need at least 2 episodes, found {len(episodes)}')
    every = 20 if len(episodes) >= 20 else len(episodes)       # every 20th episode is held out
    val_eps = [e for i, e in enumerate(episodes) if i % every == every - 1]
    train_eps = [e for i, e in enumerate(episodes) if i % every != every - 1]
    skill_text = plan_texts()
    vectors = dict(zip(skill_text.values(), embed_texts(list(skill_text.values()))))
    make = lambda eps, s: Batches(eps, manifest['phase_skill'], manifest['phases'], skill_text, vectors, s)  # noqa: E731
    train_b, val_b = make(train_eps, seed), make(val_eps, seed + 1)

    if init:            # fine-tune (a DAgger round) from verified weights
        from .action_expert import load_action_expert
        from .world_expert import WorldExpert
        world = WorldExpert(os.path.join(init, 'world_expert'), precision='fp32').model
        action, _ = load_action_expert(os.path.join(init, 'action_expert'), precision='fp32')
        world.train(), action.train()
    else:
        world = ViTModel(default_world_config(), add_pooling_layer=False)
        action = ActionExpert(ActionExpertConfig(repr_dim=world.config.hidden_size, num_joints=len(JOINT_NAMES),
                                                 delta_scale=default_delta_scale(JOINT_NAMES)))
    policy = Policy(world, action)
    decay = [p for n, p in policy.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in policy.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{'params': decay, 'weight_decay': 0.05}, {'params': no_decay, 'weight_decay': 0.0}],
                            lr=lr, betas=(0.9, 0.95))
    warmup = max(1, min(200, steps // 10))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) * (
        0.05 + 0.95 * 0.5 * (1 + np.cos(np.pi * min(1.0, s / max(1, steps))))))
    val_fixed = val_b.sample(64, per_frame)
    random_scenes = RandomScenes(seed) if scenes > 0 else None
    val_scenes = RandomScenes(seed + 99).sample(64)[:2] if scenes > 0 else None
    size, patch = world.config.image_size, world.config.patch_size

    def evaluate():
        """(action L1 on held-out episodes, object-position L1 and apple pixel error on
        unseen random scenes)."""
        policy.eval()
        with torch.no_grad():
            pred, aux, _ = policy(val_fixed[0], val_fixed[1], val_fixed[3], per_frame)
            act, _ = losses(pred, val_fixed[2], aux, val_fixed[4])
            scene_aux = apple_px = float('nan')
            if val_scenes is not None:
                _, aux_s, patches_s = policy(val_scenes[0][:0], val_fixed[1][:0], val_fixed[3][:0], per_frame,
                                             val_scenes[0])
                scene_aux = float((aux_s - val_scenes[1]).abs().mean() * 10.0)
                apple_px = apple_pixel_error(patches_s, *patch_targets(val_scenes[1], size, patch), patch)
        policy.train()
        return float(act), scene_aux, apple_px

    log: List[dict] = []
    t0 = time.perf_counter()
    run_act = run_aux = None
    bar = tqdm(range(steps), desc='training', unit='step', disable=not progress, file=sys.stderr)
    for step in bar:
        images, q, chunk, sub, aux_t = train_b.sample(batch, per_frame)
        extra = extra_q = extra_sub = None
        if random_scenes is not None:
            extra, extra_t, extra_q, extra_chunk, extra_phase = random_scenes.sample(scenes)
            aux_t = torch.cat([aux_t, extra_t])
            chunk = torch.cat([chunk, extra_chunk])
            extra_sub = train_b.subtasks(extra_phase)
        pred, aux, patches = policy(images, q, sub, per_frame, extra, extra_q, extra_sub)
        act, aux_l = losses(pred, chunk, aux, aux_t)
        loss = act + AUX_WEIGHT * aux_l + PATCH_WEIGHT * patch_loss(patches, *patch_targets(aux_t, size, patch))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
        sched.step()
        a_val, x_val = act.item(), aux_l.item()
        run_act = a_val if run_act is None else 0.95 * run_act + 0.05 * a_val
        run_aux = x_val if run_aux is None else 0.95 * run_aux + 0.05 * x_val
        if step % log_every == 0 or step == steps - 1:
            row = {'step': step, 'action_l1': a_val, 'aux_l1': x_val, 'lr': sched.get_last_lr()[0],
                   'seconds': round(time.perf_counter() - t0, 1)}
            if step % val_every == 0 or step == steps - 1:
                row['val_action_l1'], row['val_scene_aux_l1'], row['val_scene_apple_px'] = evaluate()
            log.append(row)
            last = next((r for r in reversed(log) if 'val_action_l1' in r), {})
            bar.set_postfix(l1=f'{run_act:.4f}', aux=f'{run_aux:.3f}', val=f"{last.get('val_action_l1', 0):.4f}",
                            scene=f"{last.get('val_scene_aux_l1', 0):.3f}", px=f"{last.get('val_scene_apple_px', 0):.1f}")
    seconds = time.perf_counter() - t0
    started_from = read_manifest(os.path.join(init, 'world_expert')).version if init else ''
    info = save(policy, out, manifest, data, seed, steps, log, seconds, val_fixed, per_frame, started_from)
    return info


def _dataset_digest(manifest: dict) -> str:
    h = hashlib.sha256()
    for e in manifest['episodes']:
        h.update(e['sha256'].encode())
    return h.hexdigest()


def save(policy: Policy, out: str, manifest: dict, data: str, seed: int, steps: int, log: List[dict],
         seconds: float, val_fixed, per_frame: int, started_from: str = '') -> dict:
    digest = _dataset_digest(manifest)[:10]
    world_dir, action_dir, train_dir = (os.path.join(out, d) for d in ('world_expert', 'action_expert', 'training'))
    for d in (world_dir, action_dir):
        if os.path.isdir(d):
            for n in os.listdir(d):
                os.remove(os.path.join(d, n))
    os.makedirs(train_dir, exist_ok=True)
    meta = {'seed': seed, 'trained': True, 'steps': steps, 'started_from': started_from,
            'final_val_scene_aux_l1_dm': log[-1].get('val_scene_aux_l1'),
            'dataset': ','.join(os.path.basename(os.path.normpath(d)) for d in data.split(',') if d),
            'dataset_sha256': _dataset_digest(manifest), 'episodes': len(manifest['episodes']),
            'final_val_action_l1': log[-1].get('val_action_l1'),
            'final_val_scene_apple_px': log[-1].get('val_scene_apple_px'), 'train_seconds': round(seconds, 1)}
    policy.world.save_pretrained(world_dir)
    # the version names the data, seed and steps, and the weights themselves: another
    # recipe on the same data must never share a cache key with these
    weights = sha256_file(os.path.join(world_dir, 'model.safetensors'))[:8]
    version = f'{"dagger" if started_from else "bc"}-{digest}-s{seed}-{steps}-{weights}'
    write_manifest(world_dir, WORLD_NAME, version, meta)
    policy.action.save_pretrained(action_dir)
    write_manifest(action_dir, ACTION_NAME, version, dict(meta, world_version=version, joint_names=JOINT_NAMES))
    with open(os.path.join(train_dir, 'loss_log.csv'), 'w', newline='', encoding='utf-8') as fh:
        keys = ['step', 'action_l1', 'aux_l1', 'val_action_l1', 'val_scene_aux_l1', 'val_scene_apple_px', 'lr',
                'seconds']
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for row in log:
            w.writerow({k: row.get(k, '') for k in keys})
    plot_loss(log, os.path.join(train_dir, 'loss.png'))
    write_reference_sample(world_dir, action_dir, val_fixed, os.path.join(train_dir, 'reference_sample.npz'))
    with open(os.path.join(train_dir, 'summary.json'), 'w', encoding='utf-8') as fh:
        json.dump(dict(meta, version=version), fh, indent=1)
    return dict(meta, version=version, world_dir=world_dir, action_dir=action_dir)


def write_reference_sample(world_dir: str, action_dir: str, val_fixed, path: str) -> None:
    """A stored input and the saved experts' output on it, loaded the way serving loads them."""
    from .action_expert import load_action_expert
    from .world_expert import WorldExpert
    world = WorldExpert(world_dir, precision='fp32')
    action, _ = load_action_expert(action_dir, precision='fp32')
    image = val_fixed[0][0].numpy()
    q, sub = val_fixed[1][:1], val_fixed[3][:1]
    rep = world.encode(image)
    with torch.inference_mode():
        chunk = action(torch.from_numpy(rep).unsqueeze(0), q, sub)[0].numpy()
    np.savez_compressed(path, image=image, joint_positions=q[0].numpy(), subtask=sub[0].numpy(),
                        representation=rep, chunk=chunk)


def plot_loss(log: List[dict], path: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    steps = [r['step'] for r in log]
    ax.plot(steps, [r['action_l1'] for r in log], label='action L1 (train)', lw=1)
    ax.plot(steps, [r['aux_l1'] for r in log], label='object-position L1 (aux, dm)', lw=1, alpha=0.7)
    val = [(r['step'], r['val_action_l1']) for r in log if r.get('val_action_l1') is not None]
    if val:
        ax.plot(*zip(*val), 'o-', label='action L1 (held-out episodes)')
    scene = [(r['step'], r['val_scene_aux_l1']) for r in log if r.get('val_scene_aux_l1') is not None]
    if scene:
        ax.plot(*zip(*scene), 's-', label='object-position L1 (unseen scenes, dm)')
    ax.set_yscale('log')
    ax.set_xlabel('step')
    ax.set_ylabel('loss')
    ax.set_title('behaviour cloning: world + action expert')
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--data', default='datasets/pick_place', help='dataset folders, comma-separated')
    ap.add_argument('--init', default='', help='start from the experts in this folder (a DAgger round)')
    ap.add_argument('--out', default='models')
    ap.add_argument('--steps', type=int, default=2100, help='~27 min on 2 cores')
    ap.add_argument('--batch', type=int, default=24, help='demonstration frames per step (each with 4 joint states)')
    ap.add_argument('--scenes', type=int, default=16, help='random scenes per step (position losses and extra action labels)')
    ap.add_argument('--lr', type=float, default=1e-3)
    ap.add_argument('--seed', type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, min(os.cpu_count() or 1, 4)))
    info = train(args.data, args.out, args.steps, args.batch, lr=args.lr, seed=args.seed, scenes=args.scenes,
                 init=args.init)
    print(f"trained {info['version']} in {info['train_seconds']} s: held-out action L1 "
          f"{info['final_val_action_l1']:.4f}; wrote {info['world_dir']}, {info['action_dir']}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
