#!/usr/bin/env python3
"""make test-llm: the LLM planner against a real llama.cpp server (Gemma-3-270M, started
and stopped here with a readiness check, wam_core.planning.llm_server).

Passes when the server answers every instruction (no transport error, no timeout, the
process alive to the end), grammar-constrained decoding yields at least one
schema-valid plan, and the harness's chain gives a valid plan for every instruction;
prints each reply, its latency, and what the harness does with it (use it, or fall
back to the rules and why). How many replies are valid plans is the 270M model's
quality, reported, not required: at temperature 0 it differs between builds (2-4 of 4
here)."""

import sys
import time

from wam_core.planning.grounding import grounding_reason, parse_scene
from wam_core.planning.llm import FallbackPlanner, LLMError, LLMPlanner
from wam_core.planning.llm_server import MODEL_ALIAS, LlamaServer, LLMServerError
from wam_core.planning.rules import RulePlanner, ungrounded_objects

INSTRUCTIONS = [
    'put the red apple in the fridge',
    'pick up the green cube',
    'open the fridge',
    '把红色苹果放进冰箱',
]
SCENE = parse_scene(['red apple', 'fridge', 'green cube', 'blue cube', 'yellow cube'])


def main() -> int:
    try:
        server = LlamaServer().start()
        t0 = time.monotonic()
        server.wait_ready(180)
    except LLMServerError as exc:
        print(f'error: {exc}', file=sys.stderr)
        return 1
    print(f'llama.cpp server ready in {time.monotonic() - t0:.1f} s at {server.url}')
    try:
        llm = LLMPlanner(
            server.url,
            model=MODEL_ALIAS,
            timeout_s=60,
            deadline_s=120,
            retries=0,
            schema_mode='json_object',
        )
        rules = RulePlanner()
        fb = FallbackPlanner(llm, rules, logger=lambda m: print('  harness:', m))
        ok, transport = 0, 0
        for text in INSTRUCTIONS:
            t0 = time.monotonic()
            try:
                plan = llm.plan(text)
            except LLMError as exc:
                print(f'LLM failed for {text!r} ({time.monotonic() - t0:.1f} s): {exc}')
                if not server.alive():
                    print('error: the llama.cpp server died on the request', file=sys.stderr)
                    return 1
                transport += exc.reason in ('timeout', 'connection', 'unreachable', 'http_5xx')
                used = fb.plan(text, SCENE)
                print(f'  the chain gives ({used.source}): {"; ".join(used.steps())}')
                continue
            ok += 1
            print(
                f'LLM plan for {text!r} ({time.monotonic() - t0:.1f} s): {"; ".join(plan.steps())}'
            )
            why = ungrounded_objects(plan, text) or grounding_reason(plan, SCENE)
            if why:
                fallback = '; '.join(rules.plan(text).steps())
                print(f'  the harness would fall back to the rules ({why}): {fallback}')
            used = fb.plan(text, SCENE)
            print(f'  the chain gives ({used.source}): {"; ".join(used.steps())}')
        alive = server.alive()
        print(
            f'{ok}/{len(INSTRUCTIONS)} instructions got a schema-valid plan from the LLM; '
            f'server {"alive" if alive else "DEAD"}'
        )
        if transport:
            print(f'error: {transport} requests got no answer from the server', file=sys.stderr)
        return 0 if alive and ok >= 1 and not transport else 1
    finally:
        server.stop()


if __name__ == '__main__':
    sys.exit(main())
