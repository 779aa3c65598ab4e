#!/usr/bin/env bash
# README.md stays a guide: at most 180 lines, and every repository path it names in backticks (`sp/method.h`,
# `scripts/cluster/`) exists in the tree, so that a newcomer who follows it finds what it points at. Paths with
# placeholders (<kind>, *, $VAR) and those the runs create (build/, build-sim/, results/local/) are left out.
# Usage: test_readme.sh SOURCE_DIR (exit 1 and one line per missing path).
set -euo pipefail
root=${1:?usage: test_readme.sh SOURCE_DIR}
readme=$root/README.md
[[ -f "$readme" ]] || { echo "test_readme: no $readme" >&2; exit 1; }
lines=$(wc -l <"$readme")
bad=0
if ((lines > 180)); then
  echo "README.md: $lines lines, over the guide's 180"
  bad=$((bad + 1))
fi
checked=0
while IFS= read -r path; do
  case "$path" in
    *'<'* | *'*'* | *'$'* | *' '* | -* | build/* | build-sim/* | results/local/* | http*) continue ;;
  esac
  [[ "$path" == */* ]] || continue
  checked=$((checked + 1))
  if [[ ! -e "$root/${path%/}" ]]; then
    echo "README.md: names \`$path\`, which is not in the tree"
    bad=$((bad + 1))
  fi
done < <(grep -oE '`[^`]+`' "$readme" | tr -d '`' | sort -u)
echo "test_readme: $lines lines, $checked paths checked, $bad bad"
[[ $bad -eq 0 ]]
