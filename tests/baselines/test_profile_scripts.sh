#!/usr/bin/env bash
# test_profile_scripts.sh WORKDIR: baselines/pytorch/fla_profile.py and products_beside_torch.py refuse bad arguments
# (exit 2, the argument named) and, where PyTorch cannot be imported, say so and exit 3 instead of a traceback. A stub
# `torch` package on PYTHONPATH whose import fails stands in for a machine without PyTorch, so the cases hold on a GPU
# machine too. Prints PROFILE_SCRIPTS_OK when every case passed; exit 77 (skipped) without python3.
set -uo pipefail
if [ $# -ne 1 ]; then echo "usage: $0 WORKDIR" >&2; exit 2; fi
command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$1
rm -rf "$work" && mkdir -p "$work/stub/torch"
echo 'raise ImportError("stub: no PyTorch here")' > "$work/stub/torch/__init__.py"
fails=0
case_() {  # case_ WANT_RC WANT_STDERR_TEXT SCRIPT ARGS...
  local want=$1 text=$2 script=$3
  shift 3
  local err rc
  err=$(PYTHONPATH="$work/stub" python3 "$here/baselines/pytorch/$script" "$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qF -- "$text" <<<"$err"; then
    echo "FAIL: $script $*: exit $rc (want $want), stderr: $err"
    fails=$((fails + 1))
  else
    echo "ok: $script $*: exit $rc"
  fi
}
case_ 2 "required: what" fla_profile.py
case_ 2 "heads, seq and steps must be at least 1" fla_profile.py step --heads 0
case_ 2 "T, heads, dk, dv and iters must be at least 1" fla_profile.py attention --T 0
case_ 2 "invalid choice" fla_profile.py step --heads 4 --precision fp16
case_ 3 "fla_profile.py: no PyTorch (stub: no PyTorch here)" fla_profile.py attention
case_ 3 "fla_profile.py: no PyTorch" fla_profile.py step --heads 32
case_ 3 "products_beside_torch.py: no PyTorch (stub: no PyTorch here)" products_beside_torch.py
[ "$fails" -eq 0 ] && echo PROFILE_SCRIPTS_OK
exit "$fails"
