#!/usr/bin/env bash
# One set-up script: venv + pinned packages + ROS wheel fix + colcon build + default models.
# Idempotent and fast when nothing changed (each step is skipped on a matching stamp).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
STAMPS="$VENV/.wam-stamps"
PY="${PYTHON:-python3}"

say() { printf '[setup] %s\n' "$*"; }

if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)'; then
  echo "[setup] error: Python 3.11 is required (the ROS 2 kilted wheels are cp311); found $("$PY" --version 2>&1)" >&2
  exit 1
fi

# Offscreen rendering for the MuJoCo simulator: Mesa's EGL and OSMesa from Debian.
have_gl() {
  ldconfig -p | grep -q 'libEGL.so.1' && ldconfig -p | grep -q 'libOSMesa.so' \
    && compgen -G '/usr/lib/*/dri/swrast_dri.so' >/dev/null
}
if ! have_gl; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing Mesa EGL/OSMesa for offscreen rendering (apt-get)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      libegl1 libgl1 libgl1-mesa-dri libosmesa6 >/dev/null
  else
    echo "[setup] warning: install libegl1 libgl1-mesa-dri libosmesa6 for the simulator's camera" >&2
  fi
fi

# The Mooncake Store's transfer engine links the RDMA and NUMA libraries even for TCP.
have_rdma_libs() {
  ldconfig -p | grep -q 'libibverbs.so.1' && ldconfig -p | grep -q 'librdmacm.so.1' \
    && ldconfig -p | grep -q 'libnuma.so.1'
}
if ! have_rdma_libs; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing libibverbs1 librdmacm1 libnuma1 for the Mooncake Store (apt-get)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      libibverbs1 librdmacm1 libnuma1 >/dev/null
  else
    echo "[setup] warning: install libibverbs1 librdmacm1 libnuma1 for the mooncake cache backend" >&2
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtual environment $VENV"
  "$PY" -m venv "$VENV"
fi
mkdir -p "$STAMPS"

req_hash=$(sha256sum requirements.txt | cut -c1-16)
if [ "$(cat "$STAMPS/requirements" 2>/dev/null)" != "$req_hash" ]; then
  say "installing pinned packages (first run takes a few minutes)"
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q -r requirements.txt
  echo "$req_hash" > "$STAMPS/requirements"
  rm -f "$STAMPS/cmake-fix"
fi

if [ ! -f "$STAMPS/cmake-fix" ]; then
  "$VENV/bin/python" scripts/fix_ros_wheel_cmake.py "$VENV"
  touch "$STAMPS/cmake-fix"
fi

src_hash=$(find src -type f \( -name '*.py' -o -name '*.xml' -o -name '*.msg' -o -name '*.action' \
              -o -name '*.srv' -o -name 'CMakeLists.txt' -o -name 'setup.cfg' -o -name '*.yaml' \
              -o -name '*.urdf' \) \
              -not -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
# rosidl turns .msg/.srv files into code when CMake configures, so a changed interface
# needs a fresh configure (a plain rebuild keeps the old message classes)
iface_hash=$(find src/wam_interfaces -type f \( -name '*.msg' -o -name '*.srv' -o -name '*.action' \) \
              -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
if [ "$(cat "$STAMPS/build" 2>/dev/null)" != "$src_hash" ] || [ ! -f install/setup.bash ]; then
  say "colcon build"
  # shellcheck disable=SC1091
  source "$VENV/bin/activate"
  export AMENT_PREFIX_PATH="$VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
  reconfigure=()
  if [ "$(cat "$STAMPS/interfaces" 2>/dev/null)" != "$iface_hash" ]; then
    reconfigure=(--cmake-force-configure)
  fi
  colcon --log-base log build --base-paths src --event-handlers console_cohesion- summary+ \
    ${reconfigure[@]+"${reconfigure[@]}"} --cmake-args -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF
  echo "$src_hash" > "$STAMPS/build"
  echo "$iface_hash" > "$STAMPS/interfaces"
else
  say "up to date"
fi

if [ ! -f models/world_expert/manifest.json ] || [ ! -f models/action_expert/manifest.json ]; then
  say "writing the seeded default models to models/"
  set +u
  # shellcheck disable=SC1091
  source scripts/env.sh
  set -u
  python -m wam_core.models.default_models --out models
fi
