# Fault injection (ctest -L fault): every file that rank 0 alone writes, missing, read-only, a device or on a full
# file system; a row cut short; a killed rank; bad input. Each case, at 2 and 4 CPU ranks, must end within 30 s with
# its exit status and one `spbench: error:` line, and leave every CSV it touched whole (tests/harness/fault_case.sh).
set(SPB_FAULT_CASE ${CMAKE_CURRENT_SOURCE_DIR}/harness/fault_case.sh)
set(SPB_FAULT_DIR ${CMAKE_CURRENT_BINARY_DIR}/fault)
file(MAKE_DIRECTORY ${SPB_FAULT_DIR})
set(SPB_OP operator --backend cpu -w 0 -n 1 -H 2 --dk 16 --dv 16 -L 64)
set(SPB_MODEL model --backend cpu -w 0 -n 1 --vocab 256 --hidden 64 --layers 1 --heads 2 -L 64)
set(SPB_COLL collective --backend cpu -w 0 -n 1 -b 512 -e 4K)
# A tmpfs of 16 pages mounted at $1 with `pages` of them taken (root only: the case is skipped elsewhere).
set(SPB_TMPFS_MOUNT "mkdir -p DIR && (mountpoint -q DIR || mount -t tmpfs -o size=64k tmpfs DIR 2>/dev/null || exit 77) \
&& rm -rf DIR/* && dd if=/dev/zero of=DIR/fill bs=4096 count=PAGES 2>/dev/null || true")

# spb_fault(NAME NP OPTIONS -- ARGS...): fault_case.sh OPTIONS -- mpirun -np NP spbench ARGS, labelled `fault`.
function(spb_fault name np)
  list(FIND ARGN "--" sep)
  list(SUBLIST ARGN 0 ${sep} opts)
  math(EXPR from "${sep} + 1")
  list(SUBLIST ARGN ${from} -1 args)
  add_test(NAME fault.${name}.np${np}
           COMMAND ${SPB_FAULT_CASE} ${opts} -- ${SPB_MPIEXEC} ${np} ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench> ${args})
  set_tests_properties(fault.${name}.np${np} PROPERTIES TIMEOUT 30 LABELS fault SKIP_RETURN_CODE 77)
endfunction()

foreach(np 2 4)
  set(d ${SPB_FAULT_DIR}/np${np})
  file(MAKE_DIRECTORY ${d})
  # --- every output flag, missing, read-only, a directory where a file is wanted, a device ---
  spb_fault(op_csv_missing ${np} --error "--csv /nonexistent/op.csv: its directory /nonexistent does not exist"
            -- ${SPB_OP} -m all --csv /nonexistent/op.csv)
  spb_fault(op_csv_readonly ${np} --error "--csv /proc/version: " -- ${SPB_OP} -m all --csv /proc/version)
  spb_fault(op_csv_directory ${np} --error "--csv ${d}: is a directory" -- ${SPB_OP} -m all --csv ${d})
  spb_fault(op_csv_device ${np} --error "--csv /dev/full: not a regular file" -- ${SPB_OP} -m all --csv /dev/full)
  spb_fault(op_timeline_missing ${np} --error "--timeline /nonexistent/tl.csv: its directory /nonexistent"
            -- ${SPB_OP} -m all --timeline /nonexistent/tl.csv)
  spb_fault(op_timeline_readonly ${np} --error "--timeline /proc/version: " -- ${SPB_OP} -m all
            --timeline /proc/version)
  spb_fault(op_timeline_device ${np} --error "--timeline /dev/full: not a regular file" -- ${SPB_OP} -m zeco,dp
            --timeline /dev/full)
  spb_fault(op_outputs_missing ${np} --error "--outputs /proc/spb_outputs: cannot create the directory"
            -- ${SPB_OP} -m zeco --outputs /proc/spb_outputs)
  spb_fault(op_outputs_file ${np} --error "--outputs /proc/version: not a directory"
            -- ${SPB_OP} -m zeco --outputs /proc/version)
  spb_fault(model_csv_missing ${np} --error "--csv /nonexistent/m.csv: its directory /nonexistent does not exist"
            -- ${SPB_MODEL} -m all --csv /nonexistent/m.csv)
  spb_fault(model_csv_readonly ${np} --error "--csv /proc/version: " -- ${SPB_MODEL} -m all --csv /proc/version)
  spb_fault(model_csv_device ${np} --error "--csv /dev/full: not a regular file" -- ${SPB_MODEL} -m all --csv /dev/full)
  spb_fault(model_timeline_missing ${np} --error "--timeline /nonexistent/tl.csv: its directory"
            -- ${SPB_MODEL} -m zeco,dp --timeline /nonexistent/tl.csv)
  spb_fault(model_dump_uncreatable ${np} --error "--dump /proc/spb_dump: cannot create the directory"
            -- ${SPB_MODEL} -m zeco --dump /proc/spb_dump)
  spb_fault(coll_csv_missing ${np} --error "--csv /nonexistent/c.csv: its directory" -- ${SPB_COLL}
            --csv /nonexistent/c.csv)
  spb_fault(coll_csv_readonly ${np} --error "--csv /proc/version: " -- ${SPB_COLL} --csv /proc/version)
  spb_fault(coll_csv_device ${np} --error "--csv /dev/full: not a regular file" -- ${SPB_COLL} --csv /dev/full)
  # --- a read-only file system (a tmpfs mounted read-only: root only) ---
  foreach(case op_csv model_dump)
    set(ro_${case} "mkdir -p ${d}/ro_${case} && (mountpoint -q ${d}/ro_${case} || mount -t tmpfs -o ro,size=64k tmpfs \
${d}/ro_${case} 2>/dev/null || exit 77)")
  endforeach()
  spb_fault(op_csv_readonly_fs ${np} --error "--csv ${d}/ro_op_csv/op.csv: cannot create a file there"
            --setup "${ro_op_csv}" --cleanup "umount ${d}/ro_op_csv 2>/dev/null || true"
            -- ${SPB_OP} -m all --csv ${d}/ro_op_csv/op.csv)
  spb_fault(model_dump_readonly_fs ${np} --error "--dump ${d}/ro_model_dump/dump: cannot create the directory"
            --setup "${ro_model_dump}" --cleanup "umount ${d}/ro_model_dump 2>/dev/null || true"
            -- ${SPB_MODEL} -m zeco --dump ${d}/ro_model_dump/dump)
  # --- a full file system: refused up front, or a row that no longer fits mid-run (written whole or not at all) ---
  foreach(case full_upfront full_midrun full_timeline)
    set(fs ${d}/${case})
    string(REPLACE "DIR" "${fs}" mount_${case} "${SPB_TMPFS_MOUNT}")
  endforeach()
  string(REPLACE "PAGES" "16" mount_full_upfront "${mount_full_upfront}")
  string(REPLACE "PAGES" "15" mount_full_midrun "${mount_full_midrun}")
  string(REPLACE "PAGES" "15" mount_full_timeline "${mount_full_timeline}")
  spb_fault(op_csv_full_fs ${np} --error "--csv ${d}/full_upfront/op.csv: its file system is full"
            --setup "${mount_full_upfront}" --cleanup "umount ${d}/full_upfront 2>/dev/null || true"
            -- ${SPB_OP} -m all --csv ${d}/full_upfront/op.csv)
  spb_fault(coll_csv_full_midrun ${np} --error "--csv ${d}/full_midrun/c.csv: a write failed"
            --csv ${d}/full_midrun/c.csv --setup "${mount_full_midrun}"
            --cleanup "umount ${d}/full_midrun 2>/dev/null || true"
            -- collective --backend cpu -w 0 -n 1 -b 512 -e 64K --block-elems 0 128 256 512 1024 2048 4096
               --csv ${d}/full_midrun/c.csv)
  spb_fault(op_timeline_full_midrun ${np} --error "--timeline ${d}/full_timeline/tl.csv: a write failed"
            --csv ${d}/full_timeline/tl.csv --setup "${mount_full_timeline}"
            --cleanup "umount ${d}/full_timeline 2>/dev/null || true"
            -- ${SPB_OP} -m all --timeline ${d}/full_timeline/tl.csv)
  # --- a row cut short (a killed writer, a full disk before this check): named, repaired, left out on resume ---
  foreach(case resume compare repair)
    set(half_${case} ${d}/half_${case}.csv)
    set(make_half_${case} "rm -f ${d}/half_${case}.csv* && ${SPB_MPIRUN_STR} 1 ${SPB_MPI_FLAGS_STR} \
$<TARGET_FILE:spbench> operator --backend cpu -w 0 -n 1 -H 2 --dk 16 --dv 16 -L 64 -m dp --csv ${d}/half_${case}.csv \
>/dev/null && printf 'operator,lasp1,cpu' >> ${d}/half_${case}.csv")
  endforeach()
  spb_fault(half_row_resume ${np} --rc 0 --csv ${half_resume} --setup "${make_half_resume}"
            --output "spbench: note: --csv .*half_resume.csv:4: removed a row cut short.*half_resume.csv.bak"
            -- ${SPB_OP} -m dp,lasp1 --csv ${half_resume})
  spb_fault(half_row_compare ${np} --rc 2 --error "half_compare.csv:4: the last line has no newline.*csv repair"
            --setup "${make_half_compare}" -- compare ${half_compare} ${half_compare})
  spb_fault(half_row_repair ${np} --rc 0 --csv ${half_repair} --setup "${make_half_repair}"
            --output "half_repair.csv:4: removed a row cut short \\(18 bytes, 3 fields" -- csv repair ${half_repair})
endforeach()

# A rank killed in the middle of a run: the others stop (rank_dies.sh; the seed tells the two launches apart).
foreach(np 2 4)
  add_test(NAME fault.rank_dies.np${np}
           COMMAND env SPB_DIES_SEED=51515${np} ${CMAKE_CURRENT_SOURCE_DIR}/harness/rank_dies.sh ${SPB_MPIEXEC} ${np}
                   ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench> operator --backend cpu -m lasp1 -H 2 --dk 16 --dv 16 -L 256
                   -w 0 -n 100000000 -c 0 --seed 51515${np})
  set_tests_properties(fault.rank_dies.np${np} PROPERTIES TIMEOUT 30 LABELS fault)
endforeach()

# A rank stopped (SIGSTOP) in the middle of a run at each level: the watchdog of the others (SPB_TIMEOUT_S=5) ends the
# job within 30 s, with its line and every CSV whole (rank_fault.sh). Each run is long enough to be stopped after its
# first row: many sizes (collective), many methods or steps (operator, model).
set(SPB_STOP_OP operator --backend cpu -m dp,lasp1,lasp2,zeco,ring,ulysses -H 4 --dk 16 --dv 16 -L 256 -w 0 -n 30 -c 0)
set(SPB_STOP_MODEL model --backend cpu -m dp,zeco,lasp2,lasp1 --vocab 256 --hidden 64 --layers 1 --heads 2 -L 64 -w 0
    -n 30 -c 0)
set(SPB_STOP_COLL collective --backend cpu -b 1K -e 16M -f 2 -w 0 -n 30 -c 0)
foreach(np 2 4)
  foreach(level OP MODEL COLL)
    string(TOLOWER ${level} name)
    set(csv ${SPB_FAULT_DIR}/np${np}/rank_stops_${name}.csv)
    add_test(NAME fault.rank_stops.${name}.np${np}
             COMMAND env SPB_TIMEOUT_S=5 ${CMAKE_CURRENT_SOURCE_DIR}/harness/rank_fault.sh ${csv} --
                     ${SPB_MPIEXEC} ${np} ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench> ${SPB_STOP_${level}} --csv ${csv})
    set_tests_properties(fault.rank_stops.${name}.np${np} PROPERTIES TIMEOUT 90 LABELS fault)
  endforeach()
endforeach()

# Long work is not a wait: a training step of about 2 s on one rank under SPB_TIMEOUT_S=1 finishes (exit 0). A
# watchdog that timed the step instead of the waits would end it.
spb_fault(long_step_not_a_wait 1 --rc 0 --output "# wrong results: 0"
          -- model --backend cpu -m dp --vocab 256 --hidden 128 --layers 2 --heads 2 -L 4096 -w 0 -n 1 -c 0)
set_tests_properties(fault.long_step_not_a_wait.np1 PROPERTIES ENVIRONMENT "SPB_TIMEOUT_S=1;OMP_NUM_THREADS=1")
foreach(np 1 2)
  spb_fault(timeout_not_a_number ${np} --error "SPB_TIMEOUT_S='soon' is not a number of seconds >= 0" -- ${SPB_OP} -m dp)
  set_tests_properties(fault.timeout_not_a_number.np${np} PROPERTIES ENVIRONMENT "SPB_TIMEOUT_S=soon")
endforeach()

# --- bad input: one line naming the flag or file, exit 2, before anything is allocated or measured ---
# spb_fault_input(NAME NP REGEX ARGS...): `spbench ARGS` at NP ranks must fail with REGEX.
function(spb_fault_input name np regex)
  spb_fault(input_${name} ${np} --error "${regex}" -- ${ARGN})
  set_tests_properties(fault.input_${name}.np${np} PROPERTIES FIXTURES_REQUIRED npy)
endfunction()
foreach(np 2 4)
  spb_fault_input(huge_shape ${np} "-T 100000000 -H 16 --dk 128 --dv 128: .* GiB for the ${np} ranks of this node"
                  operator --backend cpu -w 0 -n 1 -T 100000000 -H 16 --dk 128 --dv 128)
  spb_fault_input(tokens_overflow ${np} "--tokens-per-rank/-L: 1073741824 tokens on each of ${np} ranks"
                  operator --backend cpu -w 0 -n 1 -L 1073741824)
  spb_fault_input(batch_heads_overflow ${np} "--batch/-B x --heads/-H: 2000000000 x 2 \\(batch, head\\) pairs"
                  ${SPB_OP} -B 2000000000)
  spb_fault_input(tolerance_negative ${np} "--tolerance: must be a finite number > 0 \\(got -1\\)" ${SPB_OP} --tolerance -1)
  spb_fault_input(tolerance_nan ${np} "--tolerance: must be a finite number > 0 \\(got nan\\)" ${SPB_OP} --tolerance nan)
  spb_fault_input(seed_negative ${np} "--seed: must be an integer >= 0 \\(got -1\\)" ${SPB_OP} --seed -1)
  spb_fault_input(iters_zero ${np} "--iters: must be an integer >= 1 \\(got 0\\)" ${SPB_OP} -n 0)
  spb_fault_input(warmup_negative ${np} "--warmup: must be an integer >= 0 \\(got -1\\)" ${SPB_OP} -w -1)
  spb_fault_input(method_twice ${np} "--method zeco,zeco: zeco is given twice" ${SPB_OP} -m zeco,zeco)
  if(np EQUAL 2)  # the fixtures' 90 tokens split over 2 ranks, not 4
    spb_fault_input(npy_nonfinite ${np} "nonfinite/v.npy: element 5 is nan, not a finite number"
                    operator --backend cpu -w 0 -n 1 --inputs ${SPB_FIXTURES}/nonfinite)
  endif()
  spb_fault_input(model_data_directory ${np} "--data ${CMAKE_CURRENT_SOURCE_DIR}: is a directory"
                  ${SPB_MODEL} --data ${CMAKE_CURRENT_SOURCE_DIR})
  spb_fault_input(model_data_device ${np} "--data /dev/zero: not a regular file" ${SPB_MODEL} --data /dev/zero)
  spb_fault_input(model_vocab_one ${np} "--vocab: must be an integer >= 2 \\(got 1\\)" ${SPB_MODEL} --vocab 1)
  spb_fault_input(model_lr_nan ${np} "--lr: must be a finite number > 0 \\(got nan\\)" ${SPB_MODEL} --lr nan)
  spb_fault_input(model_weight_decay_nan ${np} "--weight-decay: must be a finite number >= 0 \\(got nan\\)"
                  ${SPB_MODEL} --weight-decay nan)
  spb_fault_input(model_hidden_zero ${np} "--hidden: must be an integer >= 1 \\(got 0\\)" ${SPB_MODEL} --hidden 0)
  spb_fault_input(model_repeated_flag ${np} "--steps: " ${SPB_MODEL} -n 2 -n 3)
  spb_fault_input(model_tokens_overflow ${np} "--tokens-per-rank/-L: 1073741824 tokens on each of ${np} ranks"
                  model --backend cpu --vocab 256 --hidden 64 --layers 1 --heads 2 -L 1073741824)
  spb_fault_input(model_memory_per_node ${np} "the model needs about [0-9]+ GiB per rank .* the ${np} ranks of a node"
                  model --backend cpu --vocab 256 --hidden 4096 --layers 4 --heads 2 -L 1048576)
  spb_fault_input(model_method_twice ${np} "--method dp,zeco,dp: dp is given twice" ${SPB_MODEL} -m dp,zeco,dp)
  spb_fault_input(coll_iters_zero ${np} "--iters: must be an integer >= 1 \\(got 0\\)" ${SPB_COLL} -n 0)
endforeach()
# A shape below 1 is refused, -1 too (the value the options hold where a flag is not given), at one rank as at several.
set(SPB_OP_BARE operator --backend cpu -w 0 -n 1)
set(SPB_MODEL_NO_L model --backend cpu -w 0 -n 1 --vocab 256 --hidden 64 --layers 1 --heads 2)
foreach(np 1 2 4)
  spb_fault_input(tokens_per_rank_negative ${np} "--tokens-per-rank: must be an integer >= 1 \\(got -1\\)"
                  ${SPB_OP_BARE} -L -1)
  spb_fault_input(tokens_per_rank_zero ${np} "--tokens-per-rank: must be an integer >= 1 \\(got 0\\)" ${SPB_OP_BARE} -L 0)
  spb_fault_input(seq_negative ${np} "--seq: must be an integer >= 1 \\(got -5\\)" ${SPB_OP_BARE} -T -5)
  spb_fault_input(seq_minus_one ${np} "--seq: must be an integer >= 1 \\(got -1\\)" ${SPB_OP_BARE} -T -1)
  spb_fault_input(heads_zero ${np} "--heads/-H must be >= 1 \\(got 0\\)" ${SPB_OP_BARE} -H 0)
  spb_fault_input(dk_zero ${np} "--dk must be >= 1 \\(got 0\\)" ${SPB_OP_BARE} --dk 0)
  spb_fault_input(model_tokens_per_rank_negative ${np} "--tokens-per-rank: must be an integer >= 1 \\(got -1\\)"
                  ${SPB_MODEL_NO_L} -L -1)
  spb_fault_input(model_seq_minus_one ${np} "--seq: must be an integer >= 1 \\(got -1\\)" ${SPB_MODEL_NO_L} -T -1)
endforeach()

# --- the resume key is the configuration: changing any flag that sets what is computed or timed measures again ---
add_test(NAME fault.resume_key.operator
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/harness/resume_key.sh ${SPB_FAULT_DIR}/resume_key_operator.csv
                 ${SPB_OP} -m zeco -- "--seed 7" "--gates strong" "--h0" "--dht" "-c 0" "--tolerance 1e-4" "-n 2"
                 "-w 1" -- ${SPB_MPIEXEC} 2 ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench>)
add_test(NAME fault.resume_key.inputs
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/harness/resume_key.sh ${SPB_FAULT_DIR}/resume_key_inputs.csv
                 operator --backend cpu -w 0 -n 1 -m zeco -- "--inputs ${SPB_FIXTURES}/good"
                 -- ${SPB_MPIEXEC} 2 ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench>)
add_test(NAME fault.resume_key.model
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/harness/resume_key.sh ${SPB_FAULT_DIR}/resume_key_model.csv
                 ${SPB_MODEL} -m zeco -- "--seed 7" "--lr 1e-3" "--weight-decay 0.01" "--gate-rank 8" "--wgrad-beside"
                 "--data ${CMAKE_CURRENT_SOURCE_DIR}/harness/fault_case.sh" "-n 2" "-w 1" "-c 0"
                 -- ${SPB_MPIEXEC} 2 ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench>)
add_test(NAME fault.resume_key.collective
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/harness/resume_key.sh ${SPB_FAULT_DIR}/resume_key_collective.csv
                 ${SPB_COLL} -p allscan -- "-n 2" "-w 1" "-c 0" "--timing back-to-back"
                 -- ${SPB_MPIEXEC} 2 ${SPB_MPI_FLAGS} $<TARGET_FILE:spbench>)
set_tests_properties(fault.resume_key.operator fault.resume_key.inputs fault.resume_key.model
                     fault.resume_key.collective PROPERTIES TIMEOUT 120 LABELS fault FIXTURES_REQUIRED npy
                     PASS_REGULAR_EXPRESSION "RESUME_KEY_OK")
