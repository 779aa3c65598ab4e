# The spbench command line: every bad input (harness/NOTES.md's list) fails with a one-line message naming the flag or
# file, a non-zero exit and no hang; the happy paths run and check.
set(SPB_EXPECT_ERROR ${CMAKE_CURRENT_SOURCE_DIR}/harness/expect_error.sh)
set(SPB_FIXTURES ${CMAKE_CURRENT_BINARY_DIR}/npy_fixtures)
# The mpirun prefix as one string, for the tests that go through sh -c.
string(REPLACE ";" " " SPB_MPIRUN_STR "${SPB_MPIEXEC}")
string(REPLACE ";" " " SPB_MPI_FLAGS_STR "${SPB_MPI_FLAGS}")

add_executable(make_npy_fixtures harness/make_npy_fixtures.cpp)
target_link_libraries(make_npy_fixtures PRIVATE spb_core)
add_executable(check_npy_outputs harness/check_npy_outputs.cpp)
target_link_libraries(check_npy_outputs PRIVATE spb_core)
add_test(NAME cli.fixtures COMMAND make_npy_fixtures ${SPB_FIXTURES})
set_tests_properties(cli.fixtures PROPERTIES FIXTURES_SETUP npy)

# spb_cli_error(NAME NP REGEX ARGS...): `mpirun -np NP spbench operator --backend cpu ARGS` must fail with REGEX.
function(spb_cli_error name np regex)
  add_test(NAME cli.error.${name}
           COMMAND ${SPB_EXPECT_ERROR} "${regex}" ${SPB_MPIEXEC} ${np} ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench>
                   operator --backend cpu -w 0 -n 1 ${ARGN})
  set_tests_properties(cli.error.${name} PROPERTIES FIXTURES_REQUIRED npy TIMEOUT 150)
endfunction()

spb_cli_error(unknown_method 2 "--method: 'attention' does not exist; choose one of: dp, lasp1" --method attention)
spb_cli_error(seq_not_divisible 3 "--seq/-T: 100 tokens is not divisible by the world size 3" -T 100)
spb_cli_error(more_ranks_than_tokens 4 "world size 4 is larger than the sequence \\(2 tokens\\)" -T 2)
spb_cli_error(blocks_not_dividing 2 "--blocks: K=3 must be >= 1 and divide the state's rows B\\*H\\*dk=8"
              -m zeco -K 3 -B 1 -H 2 --dk 4)
spb_cli_error(ulysses_heads 2 "--method ulysses: ulysses splits the heads over the ranks, and H=3 is not divisible by the world size 2" -m ulysses -H 3)
spb_cli_error(zero_dk 2 "--dk must be >= 1 \\(got 0\\)" --dk 0)
spb_cli_error(negative_batch 2 "--batch/-B must be >= 1 \\(got -2\\)" -B -2)
spb_cli_error(zero_tokens_per_rank 2 "--tokens-per-rank: must be an integer >= 1 \\(got 0\\)" -L 0)
spb_cli_error(npy_missing_dir 2 "/nonexistent/q.npy: cannot open" --inputs /nonexistent)
spb_cli_error(npy_missing_file 2 "missing/g.npy: cannot open" --inputs ${SPB_FIXTURES}/missing)
spb_cli_error(npy_malformed 2 "malformed/q.npy: not a .npy file" --inputs ${SPB_FIXTURES}/malformed)
spb_cli_error(npy_misshaped 2 "misshaped/k.npy: shape \\(2, 90, 2, 7\\), expected \\(2, 90, 2, 8\\)"
              --inputs ${SPB_FIXTURES}/misshaped)
spb_cli_error(npy_not_divisible 4 "--seq/-T: 90 tokens is not divisible by the world size 4"
              --inputs ${SPB_FIXTURES}/good)
spb_cli_error(unknown_backend 1 "--backend: tpu not in" --backend tpu)
spb_cli_error(allscan_device_on_cpu 2 "--allscan device: needs --backend gpu" -m zeco --allscan device)
spb_cli_error(allscan_unknown 2
              "--allscan: device-ll8 not in \\{host,host-hier,host-logdepth,rail,rail-logdepth,device,device-flag,device-ll,device-ll16,auto\\}"
              -m zeco --allscan device-ll8)
# Nodes: --ranks-per-node, and SPB_RANKS_PER_NODE where the flag is not given, must be >= 1 and divide the
# world; a results file of the layout before the nodes columns is refused, naming it.
spb_cli_error(ranks_per_node_not_dividing 3 "--ranks-per-node 2: does not divide the world size 3" -m zeco
              --ranks-per-node 2)
spb_cli_error(ranks_per_node_zero 2 "--ranks-per-node: Value 0 not in range 1" --ranks-per-node 0)
add_test(NAME cli.error.ranks_per_node_env
         COMMAND ${SPB_EXPECT_ERROR} "SPB_RANKS_PER_NODE=3: does not divide the world size 2" env SPB_RANKS_PER_NODE=3
                 ${SPB_MPIEXEC} 2 ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench> operator --backend cpu -w 0 -n 1)
set_tests_properties(cli.error.ranks_per_node_env PROPERTIES TIMEOUT 150)
add_test(NAME cli.error.csv_without_node_columns
         COMMAND sh -c "printf 'level,method,backend\\n' > ${CMAKE_CURRENT_BINARY_DIR}/csv_old_layout.csv && exec \
${SPB_EXPECT_ERROR} '--csv .*csv_old_layout.csv: the file exists with other columns' ${SPB_MPIRUN_STR} 2 \
${SPB_MPI_FLAGS_STR} $<TARGET_FILE:spbench> operator --backend cpu -w 0 -n 1 --csv \
${CMAKE_CURRENT_BINARY_DIR}/csv_old_layout.csv")
set_tests_properties(cli.error.csv_without_node_columns PROPERTIES TIMEOUT 150)
spb_cli_error(timeline_old_layout 2 "--timeline .*timeline_fixture.csv: its header is not this spbench's"
              -m dp -H 2 --dk 8 --dv 8 -L 64 --timeline ${CMAKE_CURRENT_SOURCE_DIR}/harness/data/timeline_fixture.csv)
# A machine with no GPU asked for one: a clear error, not a crash (skipped where a GPU is present).
add_test(NAME cli.error.no_gpu
         COMMAND sh -c "if nvidia-smi -L >/dev/null 2>&1; then exit 77; fi; exec ${SPB_EXPECT_ERROR} \
'--backend gpu: (no CUDA GPU found|this spbench was built without CUDA)' ${SPB_MPIRUN_STR} 2 ${SPB_MPI_FLAGS_STR} \
$<TARGET_FILE:spbench> operator --backend gpu -n 1")
set_tests_properties(cli.error.no_gpu PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 150)

# Happy paths: every method runs and checks on 3 CPU ranks; the .npy round trip matches the fp64 token loop.
foreach(m dp lasp1 lasp2 zeco ring ulysses)
  add_test(NAME cli.run.${m}
           COMMAND ${SPB_MPIEXEC} 3 ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench> operator --backend cpu -m ${m}
                   -H 3 --dk 8 --dv 8 -L 70 -w 1 -n 2 --h0 --dht)
  set_tests_properties(cli.run.${m} PROPERTIES PASS_REGULAR_EXPRESSION "# wrong results: 0" TIMEOUT 150)
endforeach()
# --timeline records --timeline-iters iterations of every rank: 3 here, for zeco and dp on 2 ranks.
add_test(NAME cli.run.timeline_iterations
         COMMAND sh -c "rm -f ${CMAKE_CURRENT_BINARY_DIR}/timeline_its.csv && ${SPB_MPIRUN_STR} 2 ${SPB_MPI_FLAGS_STR} \
$<TARGET_FILE:spbench> operator --backend cpu -m zeco,dp -H 2 --dk 8 --dv 8 -L 64 -w 0 -n 1 --timeline \
${CMAKE_CURRENT_BINARY_DIR}/timeline_its.csv --timeline-iters 3 && awk -F, 'NR > 1 && \$15 == \"forward\" \
{ n[\$1 \" \" \$12 \" \" \$13]++ } END { for (k in n) c++; print c \" forward spans\" }' \
${CMAKE_CURRENT_BINARY_DIR}/timeline_its.csv")
set_tests_properties(cli.run.timeline_iterations PROPERTIES PASS_REGULAR_EXPRESSION "\n12 forward spans" TIMEOUT 150)
add_test(NAME cli.run.all_methods_one_process
         COMMAND ${SPB_MPIEXEC} 2 ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench> operator --backend cpu -m all
                 -H 2 --dk 8 --dv 8 -L 70 -w 0 -n 1)
set_tests_properties(cli.run.all_methods_one_process PROPERTIES
                     PASS_REGULAR_EXPRESSION "zeco.*fwd_bwd.*OK[^#]*# zeco errors.*ulysses.*fwd.*OK.*\n.*ulysses.*fwd_bwd.*OK[^#]*# ulysses errors[^\n]*\n# wrong results: 0"
                     TIMEOUT 150)
add_test(NAME cli.npy_roundtrip.run
         COMMAND sh -c "mkdir -p ${CMAKE_CURRENT_BINARY_DIR}/npy_out && ${SPB_MPIRUN_STR} 3 ${SPB_MPI_FLAGS_STR} \
$<TARGET_FILE:spbench> operator --backend cpu -m zeco -K 2 -w 0 -n 1 --inputs ${SPB_FIXTURES}/good \
--outputs ${CMAKE_CURRENT_BINARY_DIR}/npy_out")
set_tests_properties(cli.npy_roundtrip.run PROPERTIES FIXTURES_REQUIRED npy FIXTURES_SETUP npy_out TIMEOUT 150)
add_test(NAME cli.npy_roundtrip.check
         COMMAND check_npy_outputs ${SPB_FIXTURES}/good ${CMAKE_CURRENT_BINARY_DIR}/npy_out)
set_tests_properties(cli.npy_roundtrip.check PROPERTIES FIXTURES_REQUIRED "npy;npy_out")

# Gated DeltaNet (--attention gdn): every method checks on 3 CPU ranks, zeco over column blocks; what it does not run
# is refused by name; a results file from before the attention column takes GLA's rows alone.
add_test(NAME cli.operator.gdn
         COMMAND ${SPB_MPIEXEC} 3 ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench> operator --backend cpu --attention gdn -m all
                 -L 70 -H 3 --dk 8 --dv 8 -K 4 --h0 --dht -w 1 -n 2)
set_tests_properties(cli.operator.gdn PROPERTIES PASS_REGULAR_EXPRESSION "ulysses errors.*# wrong results: 0" TIMEOUT 150)
spb_cli_error(gdn_overlap 2 "--overlap 1: Gated DeltaNet runs in order only" --attention gdn -m zeco --overlap 1)
spb_cli_error(gdn_blocks 2 "--blocks: K=3 must be >= 1 and divide the state's 8 columns" --attention gdn -m zeco -K 3
              --dk 8 --dv 8)
spb_cli_error(attention_unknown 1 "--attention: rwkv not in" --attention rwkv)
add_test(NAME cli.csv.late_column
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/harness/late_column.sh ${CMAKE_CURRENT_BINARY_DIR}/late_column.csv
                 ${SPB_MPIEXEC} 1 ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench>)
set_tests_properties(cli.csv.late_column PROPERTIES PASS_REGULAR_EXPRESSION "LATE_COLUMN_OK" TIMEOUT 150)

# spbench collective: every pattern runs and checks on 3 CPU ranks; bad input stops with its message.
add_test(NAME cli.collective.run
         COMMAND ${SPB_MPIEXEC} 3 ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench> collective --backend cpu -b 6K -e 24K
                 --dv 64 --block-elems 64,1536,0 -w 1 -n 3)
set_tests_properties(cli.collective.run PROPERTIES PASS_REGULAR_EXPRESSION "# wrong results: 0" TIMEOUT 150)
# ... and with Gated DeltaNet's dense map: allscan in column blocks (K = 4, 8, 16 and the whole state), chain, allgather.
add_test(NAME cli.collective.gdn
         COMMAND ${SPB_MPIEXEC} 3 ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench> collective --backend cpu --attention gdn
                 --dk 16 --dv 16 -b 4K -e 16K --block-elems 256,0 -w 1 -n 3)
set_tests_properties(cli.collective.gdn PROPERTIES PASS_REGULAR_EXPRESSION "allgather.*# wrong results: 0" TIMEOUT 150)
function(spb_collective_error name np regex)
  add_test(NAME cli.error.collective_${name}
           COMMAND ${SPB_EXPECT_ERROR} "${regex}" ${SPB_MPIEXEC} ${np} ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench>
                   collective --backend cpu -w 0 -n 1 ${ARGN})
  set_tests_properties(cli.error.collective_${name} PROPERTIES TIMEOUT 150)
endfunction()
spb_collective_error(unknown_pattern 2 "--pattern: 'broadcast' does not exist" -p broadcast)
spb_collective_error(gdn_ring 2 "--pattern ring --attention gdn: the pattern moves the same data for either family"
                     --attention gdn -p ring)
spb_collective_error(gdn_heads 2 "-b/-e --attention gdn: 2560 bytes is not a whole number of heads of --dk 16"
                     --attention gdn --dk 16 --dv 32 -b 2560 -e 2560)
spb_collective_error(dk_without_gdn 1 "--dk: the state rows of a head matter to --attention gdn alone" --dk 16)
spb_collective_error(block_not_dividing 2 "--block-elems: 192 must be a multiple of a state row \\(128 elements\\)"
                     -p allscan -b 64K -e 64K --block-elems 192)
spb_collective_error(calls_per_event 1 "--calls-per-event 2: must divide --iters \\(1\\)" --calls-per-event 2
                     --timing back-to-back)
# --timing: latency (the default) or back-to-back; groups of calls per event and --barrier-each (the older name of
# --timing latency) only where they mean something.
spb_collective_error(timing_unknown 1 "--timing: back_to_back not in \\{latency,back-to-back\\}" --timing back_to_back)
spb_collective_error(calls_per_event_latency 1
                     "--calls-per-event 2: groups back-to-back calls; give --timing back-to-back" --calls-per-event 2)
spb_collective_error(barrier_each_back_to_back 1
                     "--barrier-each: is --timing latency \\(its older name\\), and cannot go with --timing"
                     --barrier-each --timing back-to-back)
# Both timings on 2 CPU ranks: the rows' timing column, the resume key, --barrier-each as an alias.
add_test(NAME cli.collective.timing
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/harness/collective_timing.sh
                 ${CMAKE_CURRENT_BINARY_DIR}/collective_timing.csv ${SPB_MPIEXEC} 2 ${SPB_MPI_FLAGS}
                 $<TARGET_FILE:spbench>)
set_tests_properties(cli.collective.timing PROPERTIES TIMEOUT 150 PASS_REGULAR_EXPRESSION "COLLECTIVE_TIMING_OK")
spb_collective_error(size_not_rows 2 "-b/-e: 1000 bytes is not a whole number of state rows" -b 1000 -e 1000 --dv 3)
spb_collective_error(ranks_per_node_not_dividing 4 "--ranks-per-node 3: does not divide the world size 4"
                     --ranks-per-node 3)
spb_collective_error(allscan_unknown 2 "--allscan: host-tree not in" -p allscan --allscan host-tree)
# --nodes-over-network: NCCL's network between simulated nodes; MPI on CPU ranks has none to choose, and one node (or
# the launch's own nodes) has nothing to simulate.
spb_collective_error(nodes_over_network_cpu 2 "--nodes-over-network: only --backend gpu has a network to choose"
                     --ranks-per-node 1 --nodes-over-network)
spb_cli_error(nodes_over_network_cpu 2 "--nodes-over-network: only --backend gpu has a network to choose"
              --ranks-per-node 1 --nodes-over-network)

# Nodes simulated on one host: on 2 nodes x 2 ranks, zeco with `auto` runs rail-logdepth and says so, every
# node-aware All-Scan checks, and the rows record the backend, nodes and ranks per node (the awk prints them).
set(SPB_NODE_COLUMNS "awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) c[\$i] = i; next } \
{ print \"row:\", \$c[\"method\"], \$c[\"backend\"], \$c[\"nodes\"], \$c[\"ranks_per_node\"] }'")
# `all` where a method cannot run the configuration (ulysses: 3 ranks, 2 heads): the others run and check, the
# header says which was left out and why, and ulysses leaves no row; at both levels.
foreach(level operator model)
  if(level STREQUAL "operator")
    set(shape "-H 2 --dk 8 --dv 8 -L 64")
  else()
    set(shape "--vocab 256 --hidden 64 --layers 1 --heads 2 -T 192")
  endif()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/all_left_out_${level}.txt)
  add_test(NAME cli.${level}.all_leaves_out_what_cannot_run
           COMMAND sh -c "${SPB_MPIRUN_STR} 3 ${SPB_MPI_FLAGS_STR} $<TARGET_FILE:spbench> ${level} --backend cpu -m all \
${shape} -w 0 -n 1 > ${out} 2>&1; grep -qF '# left out of all: ulysses: ulysses splits the heads over the ranks, and H=2 \
is not divisible by the world size 3' ${out} && grep -qE '^ +zeco ' ${out} && ! grep -qE '^ +ulysses ' ${out} && \
grep -q '# wrong results: 0' ${out} && echo ALL_LEFT_OUT_OK")
  set_tests_properties(cli.${level}.all_leaves_out_what_cannot_run PROPERTIES PASS_REGULAR_EXPRESSION "ALL_LEFT_OUT_OK"
                       TIMEOUT 150)
endforeach()
add_test(NAME cli.run.zeco_nodes_2x2
         COMMAND sh -c "rm -f ${CMAKE_CURRENT_BINARY_DIR}/nodes_operator.csv && ${SPB_MPIRUN_STR} 4 ${SPB_MPI_FLAGS_STR} \
$<TARGET_FILE:spbench> operator --backend cpu -m zeco -H 3 --dk 8 --dv 8 -L 70 -K 2 -w 1 -n 2 --h0 --dht \
--ranks-per-node 2 --csv ${CMAKE_CURRENT_BINARY_DIR}/nodes_operator.csv && \
${SPB_NODE_COLUMNS} ${CMAKE_CURRENT_BINARY_DIR}/nodes_operator.csv")
set_tests_properties(cli.run.zeco_nodes_2x2 PROPERTIES TIMEOUT 150 PASS_REGULAR_EXPRESSION
                     "# zeco: --allscan auto runs rail-logdepth \\(2 nodes x 2 ranks, simulated\\).*# wrong results: 0.*row: zeco rail-logdepth 2 2")
foreach(v host-hier host-logdepth rail rail-logdepth)
  add_test(NAME cli.collective.${v}_2x2
           COMMAND sh -c "rm -f ${CMAKE_CURRENT_BINARY_DIR}/nodes_${v}.csv && ${SPB_MPIRUN_STR} 4 ${SPB_MPI_FLAGS_STR} \
$<TARGET_FILE:spbench> collective --backend cpu -p allscan --allscan ${v} --ranks-per-node 2 -b 6K -e 12K --dv 64 \
--block-elems 64,0 -w 1 -n 3 --csv ${CMAKE_CURRENT_BINARY_DIR}/nodes_${v}.csv && \
${SPB_NODE_COLUMNS} ${CMAKE_CURRENT_BINARY_DIR}/nodes_${v}.csv")
  set_tests_properties(cli.collective.${v}_2x2 PROPERTIES TIMEOUT 150 PASS_REGULAR_EXPRESSION
                       "# wrong results: 0.*row: allscan ${v} 2 2")
endforeach()

# The cluster launch (scripts/cluster/): every script parses, and dry runs for 2 nodes x 8 GPUs (the example hostfile,
# a Slurm allocation of 2 nodes) launch 16 ranks, 8 per node in order, with the node-aware All-Scans.
add_test(NAME cli.cluster.mpirun
         COMMAND sh -c "for f in ${CMAKE_SOURCE_DIR}/scripts/cluster/*.sh; do bash -n \"\$f\" || exit 1; done && \
SPB_DRY_RUN=1 SPB_RESULTS=${CMAKE_CURRENT_BINARY_DIR}/cluster_dry \
HOSTFILE=${CMAKE_SOURCE_DIR}/scripts/cluster/hosts.example bash ${CMAKE_SOURCE_DIR}/scripts/cluster/mpirun_hostfile.sh")
set_tests_properties(cli.cluster.mpirun PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION
                     "mpirun -np 16 [^\n]*--map-by ppr:8:node [^\n]*--allscan rail-logdepth")
add_test(NAME cli.cluster.slurm
         COMMAND sh -c "SPB_DRY_RUN=1 SLURM_JOB_NUM_NODES=2 SPB_RESULTS=${CMAKE_CURRENT_BINARY_DIR}/cluster_dry \
bash ${CMAKE_SOURCE_DIR}/scripts/cluster/slurm_sbatch.sh")
set_tests_properties(cli.cluster.slurm PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION
                     "srun --nodes=2 --ntasks=16 --ntasks-per-node=8 [^\n]*--distribution=block[^\n]*--kill-on-bad-exit=1[^\n]*\
--allscan rail")

add_test(NAME cli.cluster.model
         COMMAND sh -c "SPB_DRY_RUN=1 SPB_LEVELS=model SPB_RESULTS=${CMAKE_CURRENT_BINARY_DIR}/cluster_dry \
HOSTFILE=${CMAKE_SOURCE_DIR}/scripts/cluster/hosts.example bash ${CMAKE_SOURCE_DIR}/scripts/cluster/mpirun_hostfile.sh")
set_tests_properties(cli.cluster.model PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION
                     "mpirun -np 16 [^\n]*model --backend gpu -m all -H 32 -L 32768 -K 4 -w 5 -n 100[^\n]*_model.csv")

# spbench compare: a file against itself passes, an injected 20% slowdown exits 1, a malformed CSV stops
# with one `spbench: error:` line naming the file. The fixture is a real CPU-rank `spbench collective` run.
set(SPB_COMPARE_FIXTURE ${CMAKE_CURRENT_SOURCE_DIR}/harness/data/cpu_collective_fixture.csv)
add_test(NAME cli.compare.self
         COMMAND ${SPB_MPIEXEC} 1 ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench> compare ${SPB_COMPARE_FIXTURE}
                 ${SPB_COMPARE_FIXTURE})
set_tests_properties(cli.compare.self PROPERTIES PASS_REGULAR_EXPRESSION "# no row is slower" TIMEOUT 60)
# time_ms_mean (column 13) x 1.2 in every row: must exit 1 and say REGRESSION.
add_test(NAME cli.compare.slowdown
         COMMAND sh -c "awk -F, -v OFS=, 'NR > 1 { $13 = $13 * 1.2 } { print }' ${SPB_COMPARE_FIXTURE} \
> ${CMAKE_CURRENT_BINARY_DIR}/compare_slow.csv && ${SPB_MPIRUN_STR} 1 ${SPB_MPI_FLAGS_STR} $<TARGET_FILE:spbench> \
compare ${SPB_COMPARE_FIXTURE} ${CMAKE_CURRENT_BINARY_DIR}/compare_slow.csv > ${CMAKE_CURRENT_BINARY_DIR}/compare_slow.txt; \
rc=$?; cat ${CMAKE_CURRENT_BINARY_DIR}/compare_slow.txt; echo exit $rc; \
[ $rc -eq 1 ] && grep -q '# REGRESSION' ${CMAKE_CURRENT_BINARY_DIR}/compare_slow.txt")
set_tests_properties(cli.compare.slowdown PROPERTIES TIMEOUT 60)
add_test(NAME cli.error.compare_malformed
         COMMAND sh -c "printf 'level,method,world_size,time_ms_mean\\noperator,zeco,4\\n' > \
${CMAKE_CURRENT_BINARY_DIR}/compare_bad.csv && exec ${SPB_EXPECT_ERROR} 'compare_bad.csv:2: 3 fields, the header has 4' \
${SPB_MPIRUN_STR} 1 ${SPB_MPI_FLAGS_STR} $<TARGET_FILE:spbench> compare ${SPB_COMPARE_FIXTURE} \
${CMAKE_CURRENT_BINARY_DIR}/compare_bad.csv")
set_tests_properties(cli.error.compare_malformed PROPERTIES TIMEOUT 60)

# spbench report: an empty results directory still gives a report; report/ must match what the committed
# results/ and report/paper/paper_tables.csv give (scripts/check_report.sh compares every text file: README.md,
# tables/*.csv, plots/*.gp and plots/*.dat; the PNG/SVG images differ between gnuplot builds and are not compared,
# only their names are).
add_test(NAME cli.report.empty_results
         COMMAND sh -c "rm -rf ${CMAKE_CURRENT_BINARY_DIR}/report_empty && mkdir -p \
${CMAKE_CURRENT_BINARY_DIR}/report_empty/results && ${SPB_MPIRUN_STR} 1 ${SPB_MPI_FLAGS_STR} $<TARGET_FILE:spbench> \
report --no-plots --results ${CMAKE_CURRENT_BINARY_DIR}/report_empty/results \
--paper ${CMAKE_SOURCE_DIR}/report/paper/paper_tables.csv --out ${CMAKE_CURRENT_BINARY_DIR}/report_empty/out && \
grep -q 'No result CSVs' ${CMAKE_CURRENT_BINARY_DIR}/report_empty/out/README.md && echo REPORT_EMPTY_OK")
set_tests_properties(cli.report.empty_results PROPERTIES PASS_REGULAR_EXPRESSION "REPORT_EMPTY_OK" TIMEOUT 60)
# The exposed-communication table from a hand-made timeline (tests/harness/data/timeline_fixture.csv: dp and zeco on
# 2 ranks): zeco's slowest rank takes 1080 us against dp's 1000, and its longest communication spans 45 us (the
# chunk_cumsum span on the communication stream is not counted), so 80 us over dp, 178 %.
add_test(NAME cli.report.exposed_communication
         COMMAND sh -c "rm -rf ${CMAKE_CURRENT_BINARY_DIR}/report_exposed && mkdir -p \
${CMAKE_CURRENT_BINARY_DIR}/report_exposed/results && cp ${CMAKE_CURRENT_SOURCE_DIR}/harness/data/timeline_fixture.csv \
${CMAKE_CURRENT_BINARY_DIR}/report_exposed/results/fixture_timeline.csv && ${SPB_MPIRUN_STR} 1 ${SPB_MPI_FLAGS_STR} \
$<TARGET_FILE:spbench> report --no-plots --results ${CMAKE_CURRENT_BINARY_DIR}/report_exposed/results \
--paper ${CMAKE_SOURCE_DIR}/report/paper/paper_tables.csv --out ${CMAKE_CURRENT_BINARY_DIR}/report_exposed/out && \
grep -qF '| zeco | 1 | 1080.0 | 80.0 | 45.0 | 178 % |' ${CMAKE_CURRENT_BINARY_DIR}/report_exposed/out/README.md && \
echo REPORT_EXPOSED_OK")
set_tests_properties(cli.report.exposed_communication PROPERTIES PASS_REGULAR_EXPRESSION "REPORT_EXPOSED_OK" TIMEOUT 60)
# The same table from several recorded iterations (tests/harness/data/timeline_iterations_fixture.csv, the `iteration`
# column): medians over 3 iterations, so one slow iteration moves nothing: dp 1000, 1020, 1900 us -> 1020; zeco 1080,
# 1100, 2500 -> 1100, its communication 45, 50, 300 -> 50: 80 us over dp, 160 %.
add_test(NAME cli.report.exposed_communication_iterations
         COMMAND sh -c "rm -rf ${CMAKE_CURRENT_BINARY_DIR}/report_exposed_its && mkdir -p \
${CMAKE_CURRENT_BINARY_DIR}/report_exposed_its/results && cp \
${CMAKE_CURRENT_SOURCE_DIR}/harness/data/timeline_iterations_fixture.csv \
${CMAKE_CURRENT_BINARY_DIR}/report_exposed_its/results/fixture_timeline.csv && ${SPB_MPIRUN_STR} 1 ${SPB_MPI_FLAGS_STR} \
$<TARGET_FILE:spbench> report --no-plots --results ${CMAKE_CURRENT_BINARY_DIR}/report_exposed_its/results \
--paper ${CMAKE_SOURCE_DIR}/report/paper/paper_tables.csv --out ${CMAKE_CURRENT_BINARY_DIR}/report_exposed_its/out \
&& grep -qF '| zeco | 3 | 1100.0 | 80.0 | 50.0 | 160 % |' ${CMAKE_CURRENT_BINARY_DIR}/report_exposed_its/out/README.md \
&& echo REPORT_EXPOSED_ITS_OK")
set_tests_properties(cli.report.exposed_communication_iterations PROPERTIES PASS_REGULAR_EXPRESSION
                     "REPORT_EXPOSED_ITS_OK" TIMEOUT 60)
# The model level's tables (Tables 5 and 6, the CPU-rank model table) from a synthetic fixture
# (tests/harness/data/model_level_fixture.csv): measured cells, shares of dp and the paper's numbers, each against its
# hand-computed value (the derivations are in the script).
add_test(NAME cli.report.model_level
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/harness/check_model_report.sh $<TARGET_FILE:spbench>
                 ${CMAKE_CURRENT_SOURCE_DIR}/harness/data/model_level_fixture.csv
                 ${CMAKE_SOURCE_DIR}/report/paper/paper_tables.csv ${CMAKE_CURRENT_BINARY_DIR}/report_model)
set_tests_properties(cli.report.model_level PROPERTIES PASS_REGULAR_EXPRESSION "MODEL_REPORT_OK" TIMEOUT 60)
add_test(NAME report.drift COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/check_report.sh $<TARGET_FILE:spbench>)
set_tests_properties(report.drift PROPERTIES TIMEOUT 300)
# The plots' legends and the paper's two figures (tests/report/check_report_plots.sh): every series of every plot is
# measured, simulated or the paper's, and its legend says which, naming the method and the backend; each figure labels
# every point measured or simulated (with its results file), in the plot, tables/fig_*.csv and the README's table.
# On the committed results/ (the operator-level figures) and on the model-level fixture (the model-level figure too).
add_test(NAME report.plot_legends
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/report/check_report_plots.sh $<TARGET_FILE:spbench>
                 ${CMAKE_SOURCE_DIR}/report/paper/paper_tables.csv ${CMAKE_SOURCE_DIR}/results
                 ${CMAKE_CURRENT_BINARY_DIR}/report_plots fig_tokens_per_gpu_operator_L16384 fig_1m_tokens_on_64_gpus)
set_tests_properties(report.plot_legends PROPERTIES PASS_REGULAR_EXPRESSION "REPORT_PLOTS_OK" TIMEOUT 300)
add_test(NAME report.figure_labels
         COMMAND sh -c "rm -rf ${CMAKE_CURRENT_BINARY_DIR}/report_figures_results && mkdir -p \
${CMAKE_CURRENT_BINARY_DIR}/report_figures_results && cp ${CMAKE_CURRENT_SOURCE_DIR}/harness/data/model_level_fixture.csv \
${CMAKE_CURRENT_BINARY_DIR}/report_figures_results/fixture_model.csv && exec bash \
${CMAKE_CURRENT_SOURCE_DIR}/report/check_report_plots.sh $<TARGET_FILE:spbench> \
${CMAKE_SOURCE_DIR}/report/paper/paper_tables.csv ${CMAKE_CURRENT_BINARY_DIR}/report_figures_results \
${CMAKE_CURRENT_BINARY_DIR}/report_figures fig_tokens_per_gpu_operator_L16384 fig_1m_tokens_on_64_gpus \
fig_tokens_per_gpu_model_L32768")
set_tests_properties(report.figure_labels PROPERTIES PASS_REGULAR_EXPRESSION "REPORT_PLOTS_OK" TIMEOUT 300)

# A rank killed in the middle of a run: the others must not wait for it forever.
add_test(NAME cli.rank_dies
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/harness/rank_dies.sh ${SPB_MPIEXEC} 3 ${SPB_MPI_FLAGS}
                 $<TARGET_FILE:spbench> operator --backend cpu -m lasp1 -H 2 --dk 16 --dv 16 -L 256 -w 0 -n 100000000
                 -c 0 --seed 424242)
set_tests_properties(cli.rank_dies PROPERTIES TIMEOUT 120)

# --- spbench model: bad input stops every rank with one line naming the flag, no CSV row lost ---
# spb_model_error(NAME NP REGEX ARGS...): `spbench model --backend cpu` on a tiny model with ARGS must fail with REGEX.
# A flag in ARGS replaces the tiny model's own (the model level, like the others, refuses a flag given twice).
function(spb_model_error name np regex)
  set(base)
  foreach(pair "--vocab;256" "--hidden;64" "--layers;1" "--heads;2" "-T;128")
    list(GET pair 0 flag)
    list(FIND ARGN ${flag} given)
    if(given EQUAL -1)
      list(APPEND base ${pair})
    endif()
  endforeach()
  add_test(NAME cli.error.model_${name}
           COMMAND ${SPB_EXPECT_ERROR} "${regex}" ${SPB_MPIEXEC} ${np} ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench>
                   model --backend cpu -w 0 -n 1 ${base} ${ARGN})
  set_tests_properties(cli.error.model_${name} PROPERTIES TIMEOUT 150)
endfunction()
spb_model_error(heads_not_dividing 2 "--heads 3 does not divide the key dimension 32" --heads 3)
spb_model_error(seq_not_divisible 3 "--seq/-T: 128 tokens is not divisible by the world size 3")
spb_model_error(unknown_method 2 "--method: 'attention' does not exist" -m attention)
spb_model_error(data_missing 2 "--data /nonexistent/text: cannot open" --data /nonexistent/text)
spb_model_error(data_short 2 "--data .*: [0-9]+ bytes, fewer than the 4097 tokens of one sequence"
                --data ${CMAKE_CURRENT_SOURCE_DIR}/harness/expect_error.sh -T 4096)
spb_model_error(data_vocab 1 "--data: byte tokens need --vocab >= 256 \\(got 100\\)" --vocab 100
                --data ${CMAKE_CURRENT_SOURCE_DIR}/harness/expect_error.sh)
spb_model_error(too_large 2 "the model needs about [0-9]+ GiB per rank .* try --recompute=states, .*--recompute=blocks"
                --hidden 65536 --vocab 1000000 --recompute=none)
# auto tries every level down to blocks: where none fits, the message names the last resorts.
spb_model_error(too_large_auto 2 "the model needs about [0-9]+ GiB per rank .* use fewer tokens per rank" --hidden 65536
                --vocab 1000000)
spb_model_error(recompute_unknown 2 "--recompute: attention not in \\{auto,none,states,elementwise,states\\+elementwise,all,blocks\\}" --recompute=attention)
spb_model_error(ulysses_heads 4 "ulysses splits the heads over the ranks" -m ulysses --heads 2 -T 256)
spb_model_error(grad_overlap_with_states_beside 2 "--grad-overlap with --overlap 2: .* use one of the two"
                --grad-overlap --overlap 2)
spb_model_error(grad_overlap_with_shard_optimizer 2 "--grad-overlap with --shard-optimizer: .* use one of the two"
                --grad-overlap --shard-optimizer)
spb_model_error(dump_with_shard_optimizer 2 "--dump with --shard-optimizer: .* dump without it" --shard-optimizer
                --dump dump_sharded)
spb_model_error(nodes_over_network_one_node 2
                "--nodes-over-network: needs nodes simulated on one host .* this launch has 1 node x 2 ranks"
                --nodes-over-network)
spb_model_error(stage_times_with_csv 1 "--stage-times: give no --csv" --stage-times model_stages_refused.csv
                --csv model_refused.csv)
# --stage-times at the model level: rows of level `stage` only, the model's kernels (gemm, AdamW once a step) and the
# SP method's GLA stages (chunk_output) beside them, each with the run's world size and the model's columns.
foreach(np 1 2)
  add_test(NAME cli.model.stage_times.np${np}
           COMMAND sh -c "rm -f model_stages_np${np}.csv && ${SPB_MPIRUN_STR} ${np} ${SPB_MPI_FLAGS_STR} \
$<TARGET_FILE:spbench> model --backend cpu -m zeco -w 1 -n 2 --vocab 256 --hidden 64 --layers 1 --heads 2 -T 128 \
--stage-times model_stages_np${np}.csv | grep 'wrong results' && awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) \
c[$i] = i; next } { n += $c[\"level\"] == \"stage\"; s[$c[\"stage\"]] = 1; w = $c[\"world_size\"]; \
l = $c[\"layers\"]; if ($c[\"stage\"] == \"adamw\") a = $c[\"calls_per_iter\"] } END { print \"stage rows\", \
(n == NR - 1 && n > 0) ? \"all\" : \"not all\", \"gemm\", s[\"gemm\"] + 0, \"adamw\", a, \"chunk_output\", \
s[\"chunk_output\"] + 0, \"world\", w, \"layers\", l }' model_stages_np${np}.csv")
  set_tests_properties(cli.model.stage_times.np${np} PROPERTIES TIMEOUT 150 PASS_REGULAR_EXPRESSION
                       "wrong results: 0.*stage rows all gemm 1 adamw 1 chunk_output 1 world ${np} layers 1")
endforeach()
# --stage-times with --attention gdn on CPU ranks (what one H200 records for the simulation, sim/NOTES.md): rows of
# level `stage` only, attention gdn, Gated DeltaNet's stages (forward, rank map, zeco's dense apply in K = 2 column
# blocks: 8 of dv = 16) and the GLA stage its zeco calls (copy_4d).
add_test(NAME cli.operator.gdn_stage_times.np2
         COMMAND sh -c "rm -f gdn_stages_np2.csv && ${SPB_MPIRUN_STR} 2 ${SPB_MPI_FLAGS_STR} $<TARGET_FILE:spbench> \
operator --backend cpu --attention gdn -m dp,zeco,lasp2,lasp1 -H 2 --dk 16 --dv 16 -L 128 -K 2 -w 1 -n 2 \
--stage-times gdn_stages_np2.csv | grep 'wrong results' && awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; \
next } { n += $c[\"level\"] == \"stage\" && $c[\"attention\"] == \"gdn\"; s[$c[\"stage\"] \" \" $c[\"shape\"]] = 1 } \
END { print \"gdn stage rows\", (n == NR - 1 && n > 0) ? \"all\" : \"not all\", \
s[\"gdn_forward B1 T128 H2 dk16 dv16\"] + 0, s[\"gdn_rank_map B1 T128 H2 dk16 dv16 A1\"] + 0, \
s[\"gdn_dense_apply heads2 n16 cols8\"] + 0, s[\"copy_4d bytes2048\"] + 0 }' gdn_stages_np2.csv")
set_tests_properties(cli.operator.gdn_stage_times.np2 PROPERTIES TIMEOUT 150 PASS_REGULAR_EXPRESSION
                     "wrong results: 0.*gdn stage rows all 1 1 1 1")
# A good run writes its row and a rerun skips it (nothing measured twice, nothing lost).
# --timeline at the model level: every rank's steps, each with its whole step, a span per block's attention
# (forward and backward: 2 blocks x 2) and, with --grad-overlap, a gradient bucket per block and the head and
# embedding's (4) on the communication stream; the awk counts them for rank 1's step 1.
add_test(NAME cli.model.timeline
         COMMAND sh -c "rm -f model_timeline.csv && \
${SPB_MPIRUN_STR} 2 ${SPB_MPI_FLAGS_STR} $<TARGET_FILE:spbench> model --backend cpu -m zeco -w 1 -n 1 --vocab 256 \
--hidden 64 --layers 2 --heads 2 -T 128 --grad-overlap --timeline model_timeline.csv --timeline-steps 2 >/dev/null && \
awk -F, 'NR > 1 && $12 == 1 && $13 == 1 { n[$14 \" \" $15]++ } END { print \"spans:\", n[\"compute step\"], \
n[\"compute attention\"], n[\"comm grad_all_reduce\"] }' model_timeline.csv")
set_tests_properties(cli.model.timeline PROPERTIES TIMEOUT 150 PASS_REGULAR_EXPRESSION "spans: 1 4 4")
# The gradient sum's schedule: on CPU ranks one all-reduce after the backward unless --grad-overlap (on GPUs the sum
# beside the backward is the default: harness/model_level.h, grad_overlap_by_default); of --grad-overlap and
# --no-grad-overlap the last given wins; the header names the schedule and the row's grad_overlap column records it.
add_test(NAME cli.model.grad_sum_schedule
         COMMAND sh -c "rm -f model_grad_sum.csv && for flags in '' --grad-overlap '--grad-overlap --no-grad-overlap' \
'--no-grad-overlap --grad-overlap'; do ${SPB_MPIRUN_STR} 2 ${SPB_MPI_FLAGS_STR} $<TARGET_FILE:spbench> model \
--backend cpu -m dp -w 0 -n 1 --vocab 256 --hidden 64 --layers 1 --heads 2 -T 128 --no-resume --csv model_grad_sum.csv \
$flags || exit 1; done | grep -oE 'gradients summed by [a-z -]+' && awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) \
c[$i] = i } NR > 1 { print \"row grad_overlap\", $c[\"grad_overlap\"] }' model_grad_sum.csv")
set_tests_properties(cli.model.grad_sum_schedule PROPERTIES TIMEOUT 150 PASS_REGULAR_EXPRESSION
                     "after the backward.*per block.*after the backward.*per block.*row grad_overlap 0.*row grad_overlap 1.*row grad_overlap 0.*row grad_overlap 1")
# --shard-optimizer: the header names the schedule, the run checks against the reference method, and the row
# records it (the CSV's shard_optimizer column is 1), apart from the default's row of the same configuration.
add_test(NAME cli.model.shard_optimizer
         COMMAND sh -c "rm -f model_sharded.csv && for flag in '' --shard-optimizer; do \
${SPB_MPIRUN_STR} 2 ${SPB_MPI_FLAGS_STR} $<TARGET_FILE:spbench> model --backend cpu -m zeco -w 1 -n 2 --vocab 256 \
--hidden 64 --layers 1 --heads 2 -T 128 --csv model_sharded.csv $flag || exit 1; done | grep -E 'reduce-scatter|wrong' \
&& awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i } NR > 1 { print \"row shard_optimizer\", \
$c[\"shard_optimizer\"] }' model_sharded.csv")
set_tests_properties(cli.model.shard_optimizer PROPERTIES TIMEOUT 150 PASS_REGULAR_EXPRESSION
                     "wrong results: 0.*gradients summed by a reduce-scatter after the backward.*wrong results: 0.*row shard_optimizer 0.*row shard_optimizer 1")
# --plan: every --recompute level's memory against what is free and auto's pick, with nothing trained (exit 0).
add_test(NAME cli.model.plan
         COMMAND ${SPB_MPIEXEC} 2 ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench> model --backend cpu --plan --vocab 256
                 --hidden 64 --layers 2 --heads 4 -T 256)
set_tests_properties(cli.model.plan PROPERTIES TIMEOUT 150 PASS_REGULAR_EXPRESSION
                     "spbench model --plan.*none +[0-9.]+ +yes  <- auto.*blocks +[0-9.]+ +yes"
                     FAIL_REGULAR_EXPRESSION "wrong results|tok/s")
# --recompute=blocks: zeco's step against the reference method, and the row says blocks.
add_test(NAME cli.model.recompute_blocks
         COMMAND sh -c "rm -f model_blocks.csv && ${SPB_MPIRUN_STR} 2 ${SPB_MPI_FLAGS_STR} $<TARGET_FILE:spbench> model \
--backend cpu -m zeco -w 0 -n 1 --vocab 256 --hidden 64 --layers 2 --heads 2 -T 128 --recompute=blocks \
--csv model_blocks.csv && awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i } NR > 1 { print \"row recompute\", \
$c[\"recompute\"] }' model_blocks.csv")
set_tests_properties(cli.model.recompute_blocks PROPERTIES TIMEOUT 150 PASS_REGULAR_EXPRESSION
                     "recompute blocks.*wrong results: 0.*row recompute blocks")
add_test(NAME cli.model.csv_resume
         COMMAND sh -c "rm -f model_resume.csv && \
${SPB_MPIRUN_STR} 2 ${SPB_MPI_FLAGS_STR} $<TARGET_FILE:spbench> model --backend cpu -m zeco,lasp2 -w 1 -n 2 --vocab 256 \
--hidden 64 --layers 1 --heads 2 -T 128 --csv model_resume.csv | grep -q 'wrong results: 0' && \
test $(grep -c '^model,' model_resume.csv) -eq 2 && \
${SPB_MPIRUN_STR} 2 ${SPB_MPI_FLAGS_STR} $<TARGET_FILE:spbench> model --backend cpu -m zeco,lasp2 -w 1 -n 2 --vocab 256 \
--hidden 64 --layers 1 --heads 2 -T 128 --csv model_resume.csv | grep -c 'skipped' | grep -q 2 && \
test $(grep -c '^model,' model_resume.csv) -eq 2")
