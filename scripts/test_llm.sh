#!/usr/bin/env bash
# make test-llm: the LLM planner against a real OpenAI-compatible server on loopback:
# llama-cpp-python's server with the Gemma-3-270M GGUF from PyPI, JSON schema enforced.
# Opt-in: building llama-cpp-python offline takes several minutes on 2 cores, once
# (scripts/setup_llm.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup_llm.sh
set +u
# shellcheck disable=SC1091
source scripts/env.sh
set -u
exec python scripts/llm_check.py "$@"
