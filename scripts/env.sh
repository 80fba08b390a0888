# Source me: the environment every make target runs in (venv + ROS wheels + workspace).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
source "$ROOT/.venv/bin/activate"
export AMENT_PREFIX_PATH="$ROOT/.venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
# shellcheck disable=SC1091
source "$ROOT/install/setup.bash"
export WAM_ROOT="$ROOT"
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
# DDS stays on this machine, over loopback UDP only (config/fastdds_udp.xml): Fast DDS's
# shared-memory transport leaves a /dev/shm/fastdds_* segment behind for every node
# killed with -9. ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST would make rmw_fastrtps replace
# this profile's transports with its own (shared memory included), so it is left unset.
# Representations never travel over DDS: the representation cache carries them.
export FASTDDS_DEFAULT_PROFILES_FILE="${FASTDDS_DEFAULT_PROFILES_FILE:-$ROOT/config/fastdds_udp.xml}"
unset ROS_AUTOMATIC_DISCOVERY_RANGE
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
# One intra-op thread per process (the design's fixed thread count): OpenMP pools
# spinning in several executor threads on 2 cores slow every forward pass by 10-100x.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# Offscreen rendering for the MuJoCo simulator (must be set before mujoco is imported).
export MUJOCO_GL="${MUJOCO_GL:-egl}"
