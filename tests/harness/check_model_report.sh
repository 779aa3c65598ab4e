#!/usr/bin/env bash
# The model level's tables (Tables 5 and 6, the CPU-rank model table) from a fixture: spbench report over
# tests/harness/data/model_level_fixture.csv, a synthetic results file (gpu "fixture-gpu", git_sha "fixture"; not a
# measurement), then the cells checked one by one. The fixture holds:
#   - collective rows of one link, 10 us and 100 GB/s, for allgather, allscan and chain at 2 and 4 ranks: the fit
#     recovers it exactly, and the gradient all-reduce runs over the all-gather's link;
#   - dp operator rows at H=16, dk=dv=128, bf16: 0.2 ms + 200 ns per token. The model's per-layer attention (H=32,
#     dk=32, dv=64) was not measured, so the report scales that kernel by the work per token,
#     32 (4 32 64 + 64 96) / (16 (4 128 128 + 64 256)) = 0.35;
#   - model rows (H=32, hidden 2048, 20 layers, 1e9 params) at 32768 tokens per GPU: dp 700, 720, 730 ms at 1, 2, 4
#     ranks; zeco 725, 740; lasp2 730, 760; lasp1 900, 1300 at 2, 4; and a newer zeco row at 4 ranks with 4 heads,
#     which the table must not show (the paper's configuration wins), and newer zeco rows at 4 ranks of the other
#     schedules (--no-grad-overlap, --overlap 2, --shard-optimizer), which it must not show either. At 16384: dp 360 and
#     zeco 365 ms at 2 ranks. The GPU rows at P > 1 of the default schedule sum their gradients beside the backward
#     (grad_overlap 1); the --no-grad-overlap row has 0, and so do the --overlap 2 and --shard-optimizer rows, whose
#     default that is.
#   - CPU-rank model rows: dp at 1 and 2 ranks, zeco at 2, 256 tokens per rank, equal losses.
# Hand-computed cells (32768 tokens; state S = 32 x 32 x 64 x 4 B = 256 KiB, All-Scan blocks of 64 KiB, K = 4;
# gradients 4e9 B; T_compute = dp's 700 ms at one rank, where the all-reduce is 0; at P > 1 the default schedule sums
# the gradients beside the backward, so a prediction adds only the all-reduce's tail: the larger of its last block's
# share, ar / 20 layers, and ar - 2/3 x 700 ms, which is negative for every ar here):
#   measured zeco at 2: 32768 / 0.725 s = 45197 tokens/s, ÷ dp 720 / 725 = 0.99x
#   model dp at 8: all-reduce 2 x 7 x (10 us + 4e9 / 8 / 100 GB/s) = 70.14 ms, its tail 3.507 ms:
#     32768 / 0.703507 s = 46578
#   model zeco at 8: + 20 layers x 2 passes x (7 + 3) hops x (10 us + 64 KiB / 100 GB/s) = 4.262 ms: 46298
#   model dp at 256: the ring closes through the network (5 us, 50 GB/s): 2 x 255 x (5 us + 4e9 / 256 / 50 GB/s)
#     = 161.9 ms, its tail 8.097 ms: 32768 / 0.708097 s = 46276
#   model lasp2 at 256: + 20 x 2 x (255 x (5 us + 256 KiB x 65/64 / 50 GB/s) + 256 x 256 KiB / 2 TB/s) = 106.7 ms:
#     40218, 0.87x of dp's; the paper's 25402 / 46588 = 0.55x; ours ÷ paper 1.59
# The rows' git_sha "fixture" is no commit: each measured cell says "? commit unknown".
# Usage: check_model_report.sh SPBENCH FIXTURE_CSV PAPER_CSV WORKDIR   (prints MODEL_REPORT_OK when every cell is right)
set -euo pipefail
spbench=$1 fixture=$2 paper=$3 work=$4
rm -rf "$work" && mkdir -p "$work/results"
cp "$fixture" "$work/results/fixture_model.csv"
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
"$spbench" report --no-plots --results "$work/results" --paper "$paper" --out "$work/out" >"$work/log" 2>&1 || {
  cat "$work/log"; echo "check_model_report: spbench report failed"; exit 1; }
readme=$work/out/README.md
cfg='H=32 (dk 32, dv 64), hidden 2048, 20 layers, vocab 32000, mlp 5632, B=1, bf16'
fail=0
expect() {  # a whole line of the README (a table row), exactly
  grep -qxF -- "$1" "$readme" || { echo "check_model_report: missing in README.md: $1"; fail=1; }
}
expect_in() {  # a fragment of a line of FILE
  grep -qF -- "$2" "$1" || { echo "check_model_report: missing in $1: $2"; fail=1; }
}
# Table 6: measured rows, their share of dp, the prediction beside them.
expect "| 2 | zeco | 45197 | $cfg | fixture-gpu, 2 ranks, nccl, 2000-01-01, fixture, ? commit unknown | 46565 | not published here | 0.99x | 1.00x | — | — |"
expect "| 4 | zeco | 44281 | $cfg | fixture-gpu, 4 ranks, nccl, 2000-01-01, fixture, ? commit unknown | 46443 | not published here | 0.99x | 1.00x | — | — |"
expect "| 4 | lasp1 | 25206 | $cfg | fixture-gpu, 4 ranks, nccl, 2000-01-01, fixture, ? commit unknown | 38717 | not published here | 0.56x | 0.83x | — | — |"
# ... the paper's numbers and ratios beside the predictions where it published them.
expect "| 8 | dp | not measured | — | — | 46578 | 49633 | — | 1.00x | 1.00x | — |"
expect "| 8 | zeco | not measured | — | — | 46298 | 47369 | — | 0.99x | 0.95x | model 0.99x ÷ paper 0.95x = 1.04 |"
expect "| 8 | lasp1 | not measured | — | — | 31569 | 27014 | — | 0.68x | 0.54x | model 0.68x ÷ paper 0.54x = 1.25 |"
expect "| 256 | dp | not measured | — | — | 46276 | 46588 | — | 1.00x | 1.00x | — |"
expect "| 256 | lasp2 | not measured | — | — | 40218 | 25402 | — | 0.87x | 0.55x | model 0.87x ÷ paper 0.55x = 1.59 |"
expect "| 256 | lasp1 | not measured | — | — | 2542 | not published here | — | 0.05x | — | — |"
# ... and where there is no prediction, why.
expect "| 8 | ring | not measured | — | — | no fit (a pattern it needs was not measured) | not published here | — | — | — | — |"
expect "| 64 | ulysses | not measured | — | — | n/a (H=32 not divisible by P) | not published here | — | — | — | — |"
expect_in "$readme" "so T_compute = 700 ms"
# Against the paper, point by point: ours ÷ paper at every GPU count the paper published, "agrees" only
# where all are within 0.80-1.25, and only where every link of the prediction held out (the fixture's links are exact;
# zeco's and lasp2's model-level predictions at P = 4 are within 30%). zeco: 1.04, 1.04, 1.03, 0.99 at 8, 64, 128,
# 256. lasp2: 1.15, 1.24, 1.34, 1.59. lasp1's model-level prediction misses its 1300 ms at P = 4 by -35% (1 / 38717 x
# 32768 = 846 ms): no verdict.
expect_in "$readme" "Ours ÷ paper: 8 GPUs 1.04 (model), 64 GPUs 1.04 (model), 128 GPUs 1.03 (model), 256 GPUs 0.99 (model): **agrees** (every point within 0.80-1.25)."
expect_in "$readme" "Ours ÷ paper: 8 GPUs 1.15 (model), 64 GPUs 1.24 (model), 128 GPUs 1.34 (model), 256 GPUs 1.59 (model): **disagrees** at 128, 256 GPUs"
expect_in "$readme" "Ours ÷ paper: 8 GPUs 1.25 (model), 64 GPUs 0.75 (model): **no verdict: the model's lasp1 model-level prediction missed by -35% at P = 4**"
# The newer 4-head zeco row (32768 / 0.1 s = 327680 tokens/s) is not the one shown; nor the newer rows of other
# schedules: zeco with --no-grad-overlap (655360), with --overlap 2 (819200) and with --shard-optimizer (983040).
tables=$work/tables_5_6.md
sed -n '/^## Table 5/,/^## Every GPU model-level/p' "$readme" > "$tables"
if grep -qF "327680" "$tables"; then echo "check_model_report: the 4-head row is shown"; fail=1; fi
if grep -qF "655360" "$tables"; then echo "check_model_report: a --no-grad-overlap row is shown"; fail=1; fi
if grep -qF "819200" "$tables"; then echo "check_model_report: an --overlap 2 row is shown"; fail=1; fi
if grep -qF "983040" "$tables"; then echo "check_model_report: a --shard-optimizer row is shown"; fail=1; fi
# ... but the section of every configuration lists each of them, with its schedule, beside dp's share where dp ran
# the same configuration and gradient schedule (720 / 725 ms at 2 ranks: 0.993x).
expect "| fixture-gpu | 2 | 32768 | H=32 | default | zeco | 45197 ? | 0.993x | 725 | — | — | fixture ? |"
expect "| fixture-gpu | 4 | 32768 | H=32 | --no-grad-overlap | zeco | 655360 ? | — | 50 | — | — | fixture ? |"
expect "| fixture-gpu | 4 | 32768 | H=32 | --shard-optimizer | zeco | 983040 ? | — | 33.33 | — | — | fixture ? |"
expect "| fixture-gpu | 4 | 32768 | H=4 | default | zeco | 327680 ? | — | 100 | — | — | fixture ? |"
# Table 5: the paper gives no number at 16384 tokens per GPU.
expect "| 2 | zeco | 44888 | $cfg | fixture-gpu, 2 ranks, nccl, 2000-01-01, fixture, ? commit unknown | 45297 | not published here | 0.99x | 1.00x | — | — |"
# The CPU-rank model table: measured rows only, with their losses.
expect "| 2 | zeco | 4000 | cpu, 2 ranks, 2000-01-01, fixture, ? commit unknown | 5.545 | 0.94x |"
# The plot's data (each method's share of dp's): measured, model and the paper's points (zeco at 256: 40967 / 46588).
dat=$work/out/plots/model_throughput_L32768.dat
expect_in "$dat" "# [1] measured: zeco (nccl) measured, fixture-gpu"
expect_in "$dat" "modelled: zeco (nccl) modelled, fitted on fixture-gpu"
expect_in "$dat" "paper: zeco paper, H100, model table"
expect_in "$dat" "256 0.879346613"
# The machine-readable table.
expect_in "$work/out/tables/table6.csv" "8,zeco,,,,,,,,,46297.6,47369,,0.993978,0.954385"
[ $fail -eq 0 ] && echo MODEL_REPORT_OK
exit $fail
