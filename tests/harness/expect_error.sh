#!/usr/bin/env bash
# expect_error.sh REGEX COMMAND...: the command must fail (non-zero, not killed by a signal, not timed out), print
# exactly one "spbench: error:" line, and that line must match REGEX. A rank that hangs fails through the timeout.
set -u
regex=$1; shift
out=$(timeout 120 "$@" 2>&1); rc=$?
lines=$(printf '%s\n' "$out" | grep -c '^spbench: error:')
line=$(printf '%s\n' "$out" | grep -m1 '^spbench: error:')
fail() { printf 'FAIL: %s\n--- output (exit %d) ---\n%s\n' "$1" "$rc" "$out"; exit 1; }
[ "$rc" -eq 0 ] && fail "the command succeeded"
[ "$rc" -eq 124 ] && fail "the command hung (timeout)"
[ "$rc" -gt 128 ] && fail "killed by a signal"
printf '%s' "$out" | grep -qiE 'core dumped|segmentation fault' && fail "crashed"
[ "$lines" -eq 1 ] || fail "expected exactly one 'spbench: error:' line, got $lines"
printf '%s\n' "$line" | grep -qE -- "$regex" || fail "the error does not match: $regex"
printf 'ok (exit %d): %s\n' "$rc" "$line"
