#!/usr/bin/env bash
# Every "DESIGN §N" the sources and notes cite (also "DESIGN.md §N", ranges "§4-5" and lists "§5, §9") must name a
# section of docs/DESIGN.md, a heading "## N. ..."; and no file may cite a design outside the repository
# (shared/DESIGN). Usage: test_design_citations.sh SOURCE_DIR (exit 1 and one line FILE:LINE per bad citation).
set -euo pipefail
root=${1:?usage: test_design_citations.sh SOURCE_DIR}
design=$root/docs/DESIGN.md
[[ -f "$design" ]] || { echo "test_design_citations: no $design" >&2; exit 1; }
self=tests/docs/test_design_citations.sh

declare -A have=()
while IFS= read -r n; do have[$n]=1; done < <(sed -nE 's/^## ([0-9]+)\. .*/\1/p' "$design")
[[ ${#have[@]} -gt 0 ]] || { echo "test_design_citations: $design has no '## N.' heading" >&2; exit 1; }

# The files: what git tracks (and what is not yet committed but not ignored), else every file under the tree.
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard)
else
  mapfile -t files < <(find . -type f ! -path './build*' ! -path './.git/*' | sed 's|^\./||')
fi
sources=()
for f in "${files[@]}"; do
  case "$f" in
    *.cpp | *.h | *.cu | *.cuh | *.md | *.sh | *.cmake | *.py | *.txt | *.xml) [[ -f "$f" ]] && sources+=("$f") ;;
  esac
done

bad=0
cited=0
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  text=${rest#*:}
  [[ "$file" == "$self" ]] && continue
  while IFS= read -r cite; do
    nums=()
    while IFS= read -r part; do
      if [[ "$part" == *-* ]]; then
        for ((n = ${part%-*}; n <= ${part#*-}; n++)); do nums+=("$n"); done
      else
        nums+=("$part")
      fi
    done < <(grep -oE '[0-9]+(-[0-9]+)?' <<<"${cite#DESIGN}")
    for n in "${nums[@]}"; do
      cited=$((cited + 1))
      if [[ -z "${have[$n]+x}" ]]; then
        echo "$file:$line: cites DESIGN §$n, which docs/DESIGN.md has no '## $n.' heading for"
        bad=$((bad + 1))
      fi
    done
  done < <(grep -oE 'DESIGN(\.md)? §[0-9]+(-[0-9]+)?(, §[0-9]+(-[0-9]+)?)*' <<<"$text")
done < <(grep -nE 'DESIGN(\.md)? §' "${sources[@]}" /dev/null || true)

while IFS= read -r hit; do
  [[ "${hit%%:*}" == "$self" ]] && continue
  echo "$hit: cites a design outside the repository (the design is docs/DESIGN.md)"
  bad=$((bad + 1))
done < <(grep -nE 'shared/DESIGN' "${sources[@]}" /dev/null || true)

echo "test_design_citations: ${#sources[@]} files, $cited citations of ${#have[@]} sections, $bad bad"
[[ $bad -eq 0 ]]
