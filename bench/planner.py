#!/usr/bin/env python3
"""Planner benchmarks -> the "planner" section of bench/report.json.

    python bench/planner.py [--llm-url http://127.0.0.1:8080/v1] [--instructions FILE]

1. Plan quality on bench/planner_instructions.yaml (English, Chinese, mixed;
   paraphrases, several steps, unseen objects, skills the robot lacks, unsafe
   requests), grounded on the file's scene, for three planners: the rules alone, the
   LLM alone (needs --llm-url; null without a server) and the fallback chain the
   harness runs (guard, LLM when given, rules with the similarity mapping, grounding).
   supported_exact: the share of instructions with a plan whose skill chain is exactly
   the expected one; refusal_correct: the share of the others that were refused.
2. The planner as a service: N robots (1, 4, 16) sending instructions concurrently
   (the same few tasks, some written a little differently), plan latency p50/p99 and
   plans per second for the rules, the LLM and the LLM behind the plan cache
   (``llm_cached``; needs --llm-url), with the cache's hit rate. llama.cpp's server
   reports no prompt-prefix reuse through this API (``llm_prefix_reuse`` is null).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import numpy as np
import yaml

from wam_core.common.paths import workspace_root
from wam_core.planning.grounding import grounding_reason, parse_scene
from wam_core.planning.guard import unsafe_reason
from wam_core.planning.llm import CircuitBreaker, FallbackPlanner, LLMPlanner
from wam_core.planning.plan import Plan, PlanError
from wam_core.planning.rules import RulePlanner
from wam_system_tests.report import update_report

DEFAULT_SET = os.path.join(workspace_root(), 'bench', 'planner_instructions.yaml')


class Replies:
    """The LLM planner, asked once per instruction: the LLM-alone row and the chain's
    row use the same real replies (a 270M model on 2 cores takes seconds per plan)."""

    def __init__(self, llm: LLMPlanner):
        self.llm, self.model = llm, llm.model
        self._replies: dict[str, object] = {}

    def plan(self, instruction: str) -> Plan:
        if instruction not in self._replies:
            try:
                self._replies[instruction] = self.llm.plan(instruction)
            except Exception as exc:  # LLMError: replayed as raised
                self._replies[instruction] = exc
        reply = self._replies[instruction]
        if isinstance(reply, Exception):
            raise reply
        return reply

    def close(self) -> None:
        self.llm.close()


def bench_llm(url: str, model: str) -> LLMPlanner:
    """For measuring: no circuit breaker (every request reaches the server) and a
    deadline that lets a slow reply finish."""
    return LLMPlanner(
        url,
        model,
        timeout_s=60,
        deadline_s=120,
        retries=0,
        schema_mode='json_object',
        breaker=CircuitBreaker(failures=1 << 30),
    )


class Alone:
    """One planner with the guard and the grounding every plan goes through."""

    def __init__(self, planner):
        self.planner = planner

    def plan(self, instruction: str, perceived) -> Plan:
        why = unsafe_reason(instruction)
        if why:
            raise PlanError(why)
        plan = self.planner.plan(instruction)
        why = grounding_reason(plan, perceived)
        if why:
            raise PlanError(why)
        return plan


def quality(planner, items: list[dict], scene) -> dict:
    supported = [i for i in items if 'plan' in i]
    refused = [i for i in items if 'plan' not in i]
    exact, correct, misses = 0, 0, []
    for item in items:
        try:
            got = planner.plan(item['text'], scene).steps()
        except Exception as exc:  # a PlanError, or an LLM error: a refusal here
            got = None
            why = str(exc)
        if 'plan' in item:
            ok = got == item['plan']
            exact += ok
        else:
            ok = got is None
            correct += ok
        if not ok:
            misses.append({'text': item['text'], 'got': got if got is not None else why})
    return {
        'supported_exact': exact / max(1, len(supported)),
        'refusal_correct': correct / max(1, len(refused)),
        'n': len(items),
        'n_supported': len(supported),
        'n_refusals': len(refused),
        'misses': misses,
    }


# What a fleet sends: the same few tasks, some written a little differently
SERVING_POOL = [
    'put the red apple in the fridge',
    'Put the red apple in the fridge.',
    'pick up the green cube',
    'pick up the green cube.',
    'open the fridge',
    'Open the fridge',
    'find the blue cube',
    'find the blue cube!',
]


def serving(plan_fn, robots: int, per_robot: int) -> dict:
    """``robots`` threads, each planning ``per_robot`` instructions back to back (robot k
    starts at pool entry k): plan latency p50/p99 and plans per second over the run."""
    lat: list[float] = []
    lock = threading.Lock()

    def robot(k: int) -> None:
        for j in range(per_robot):
            text = SERVING_POOL[(k + j * robots) % len(SERVING_POOL)]
            t0 = time.perf_counter()
            try:
                plan_fn(text)
            except PlanError:
                pass
            with lock:
                lat.append((time.perf_counter() - t0) * 1e3)

    threads = [threading.Thread(target=robot, args=(k,)) for k in range(robots)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    p50, p99 = np.percentile(lat, [50, 99])
    return {
        'p50_ms': float(p50),
        'p99_ms': float(p99),
        'plans_per_s': len(lat) / wall,
        'plans': len(lat),
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--instructions', default=DEFAULT_SET)
    ap.add_argument('--llm-url', default='', help='an OpenAI-compatible server (else no LLM)')
    ap.add_argument('--llm-model', default='default')
    ap.add_argument(
        '--llm-plans', type=int, default=1, help='instructions per robot for the LLM rows'
    )
    args = ap.parse_args()
    with open(args.instructions, encoding='utf-8') as fh:
        doc = yaml.safe_load(fh)
    items, scene = doc['instructions'], parse_scene(doc['scene'])
    from wam_core.planning.embedding import SubtaskEmbedder
    from wam_core.planning.paraphrase import SimilarityPlanner

    print('loading all-MiniLM-L6-v2 for the similarity mapping ...', flush=True)
    embedder = SubtaskEmbedder()
    llm = Replies(bench_llm(args.llm_url, args.llm_model)) if args.llm_url else None
    chain_planner = FallbackPlanner(llm, SimilarityPlanner(embedder), logger=lambda m: None)
    planners = {
        'rules': Alone(RulePlanner()),
        'llm': Alone(llm) if llm is not None else None,
        'fallback': chain_planner,
    }
    accuracy = {}
    for name, planner in planners.items():
        if planner is None:
            accuracy[name] = None
            print(f'{name:9} not run (no --llm-url)')
            continue
        accuracy[name] = q = quality(planner, items, scene)
        print(
            f'{name:9} supported exact {q["supported_exact"]:.3f} of {q["n_supported"]}, '
            f'refusals correct {q["refusal_correct"]:.3f} of {q["n_refusals"]}'
        )
        for m in q['misses']:
            print(f'          miss: {m["text"]!r} -> {m["got"]}')
    serve: dict = {}
    rules = RulePlanner()
    serve['rules'] = {str(n): serving(rules.plan, n, 200) for n in (1, 4, 16)}
    cache = None
    if llm is not None:
        from wam_core.planning.plan_cache import PlanCache

        fresh = bench_llm(args.llm_url, args.llm_model)  # every request to the server
        plain = FallbackPlanner(fresh, RulePlanner(), logger=lambda m: None)
        serve['llm'] = {str(n): serving(plain.plan, n, args.llm_plans) for n in (1, 4, 16)}
        cache = PlanCache(embedder)
        cached = FallbackPlanner(fresh, RulePlanner(), logger=lambda m: None, cache=cache)
        serve['llm_cached'] = {str(n): serving(cached.plan, n, args.llm_plans) for n in (1, 4, 16)}
    else:
        serve['llm'] = serve['llm_cached'] = None
    for name, figures in serve.items():
        if figures:
            for n, f in figures.items():
                print(
                    f'serving {name:10} N={n:>2}: p50 {f["p50_ms"]:.3f} ms, p99 '
                    f'{f["p99_ms"]:.3f} ms, {f["plans_per_s"]:.2f} plans/s ({f["plans"]} plans)'
                )
        else:
            print(f'serving {name:10} not run (no --llm-url)')
    if cache is not None:
        print(f'plan cache hit rate {cache.hit_rate:.3f}')
    if llm is not None:
        replies = [r for r in llm._replies.values() if not isinstance(r, Exception)]
        print(f'LLM replies: {len(replies)} schema-valid plans of {len(llm._replies)}')
    section = {
        'instructions': os.path.relpath(args.instructions, workspace_root()),
        'accuracy': accuracy,
        'serving': serve,
        'plan_cache_hit_rate': cache.hit_rate if cache is not None else None,
        'llm_prefix_reuse': None,
        'llm_url': args.llm_url or None,
    }
    print(f'\nwrote {update_report("planner", section)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
