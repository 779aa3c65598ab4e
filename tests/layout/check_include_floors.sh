#!/usr/bin/env bash
# The floors of the source tree (DESIGN §4): a file may include its own folder's headers and those of any lower
# floor, never a higher floor's, nor a folder beside it on the same floor (zeco/ and baselines/ stand side by side).
# Usage: check_include_floors.sh SOURCE_DIR   (exit 1 and one line per upward include when any is found)
set -euo pipefail
root=${1:?usage: check_include_floors.sh SOURCE_DIR}
declare -A floor=([runtime]=0 [kernels]=1 [sp]=2 [zeco]=3 [baselines]=3 [model]=4 [sim]=5 [backend]=6 [harness]=7
                  [report]=8 [cli]=9)

bad=0
checked=0
for dir in "${!floor[@]}"; do
  [[ -d "$root/$dir" ]] || { echo "check_include_floors: no folder $root/$dir" >&2; exit 2; }
  while IFS= read -r -d '' file; do
    checked=$((checked + 1))
    while IFS= read -r line; do
      target=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$line")
      top=${target%%/*}
      [[ "$target" == */* && -n "${floor[$top]+x}" ]] || continue  # generated or third-party headers
      if [[ "$top" != "$dir" && ${floor[$top]} -ge ${floor[$dir]} ]]; then
        echo "${file#$root/}: includes \"$target\" (floor $top=${floor[$top]} over $dir=${floor[$dir]})"
        bad=$((bad + 1))
      fi
    done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" || true)
  done < <(find "$root/$dir" -type f \( -name '*.h' -o -name '*.cuh' -o -name '*.cpp' -o -name '*.cu' \) -print0)
done
echo "check_include_floors: $checked files, $bad upward includes"
[[ $bad -eq 0 ]]
