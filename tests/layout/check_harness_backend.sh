#!/usr/bin/env bash
# The levels reach the simulated backend only through backend/ (DESIGN §4): no file of harness/ includes a header of
# sim/, and none casts a device to its kind (dynamic_cast<SimDevice...>, or of any other Device), which make_backend
# alone may do.
# Usage: check_harness_backend.sh SOURCE_DIR   (exit 1 and one line per offending line when any is found)
set -euo pipefail
root=${1:?usage: check_harness_backend.sh SOURCE_DIR}
[[ -d "$root/harness" ]] || { echo "check_harness_backend: no folder $root/harness" >&2; exit 2; }
files=$(find "$root/harness" -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) | sort)
bad=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"sim/|dynamic_cast[[:space:]]*<[^>]*(Device|dev)' \
        $files /dev/null | sed "s|^$root/||" || true)
if [[ -n "$bad" ]]; then
  echo "$bad"
  echo "check_harness_backend: harness/ includes sim/ or casts a device; go through backend/backend.h"
  exit 1
fi
echo "check_harness_backend: $(wc -l <<<"$files") files, none includes sim/ or casts a device"
