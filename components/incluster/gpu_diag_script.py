"""The node-start diagnostic's script (`dcgmi diag` in NVIDIA's DCGM image, gpu_health.diag_pod runs it in
an init container) and the exit statuses it reads; its termination message is what the controller parses
(gpu_health_agent)."""

from __future__ import annotations

# dcgmi diag exit status: DCGM_ST_NVVS_ERROR (-30) and DCGM_ST_NVVS_ISOLATE_ERROR (-51) as a byte, i.e. a test
# failed (NVIDIA/DCGM v4.6.0 dcgmi/Diag.cpp, dcgmlib/dcgm_structs.h; main returns the dcgmReturn_t).
DIAG_FAILED_EXIT = (226, 205)
DIAG_TIMEOUT_S = {1: 300, 2: 900, 3: 3600}


def diag_script(level: int) -> str:
    """The init container's script: wait for the GPU stack, run dcgmi diag once, report, exit 0.

    It always exits 0 (a failing init container would rerun the diagnostic forever); the first line of the
    termination message is what the controller reads.
    """
    failed = "|".join(str(c) for c in DIAG_FAILED_EXIT)
    return f"""#!/bin/bash
set -u
report() {{
  printf 'result=%s rc=%s\\n%s\\n' "$1" "$2" "$3" | head -c 3800 > /dev/termination-log
  exit 0
}}
# The operator's validator writes this once driver and container toolkit work (as dcgm-exporter waits).
for _ in $(seq 1 360); do
  [ -f /run/nvidia/validations/toolkit-ready ] && break
  sleep 5
done
[ -f /run/nvidia/validations/toolkit-ready ] || report error -1 "GPU stack not validated after 30 minutes"
# A node already running GPU work is in service: diagnosing now would fight the job for its GPUs.
if command -v nvidia-smi >/dev/null 2>&1; then
  busy=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null)
  [ -n "$busy" ] && report skipped 0 "GPUs busy, node already in service"
fi
nv-hostengine || report error -1 "nv-hostengine did not start"
for _ in $(seq 1 30); do dcgmi discovery -l >/dev/null 2>&1 && break; sleep 1; done
out=$(timeout {DIAG_TIMEOUT_S[level]} dcgmi diag -r {level} 2>&1)
rc=$?
nv-hostengine --term >/dev/null 2>&1
case $rc in
  0) report pass 0 "$out" ;;
  {failed}) report fail "$rc" "$out" ;;
  *) report error "$rc" "$out" ;;
esac
"""
