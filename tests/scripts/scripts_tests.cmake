# The sweep scripts under faults (tests/scripts/*.sh, CPU ranks at np 2 through scripts/sweep_cpu.sh's SPB_CPU_*
# settings): SIGINT and SIGTERM while a sweep runs, and a sweep whose every configuration fails.
set(spb_scripts_tests)
foreach(sig INT TERM)
  add_test(NAME scripts.sweep_sig${sig}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/sweep_signal.sh $<TARGET_FILE_DIR:spbench> ${sig})
  list(APPEND spb_scripts_tests scripts.sweep_sig${sig})
endforeach()
add_test(NAME scripts.sweep_all_fail
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/sweep_all_fail.sh $<TARGET_FILE_DIR:spbench>)
list(APPEND spb_scripts_tests scripts.sweep_all_fail)
set_tests_properties(${spb_scripts_tests} PROPERTIES TIMEOUT 60 LABELS fault)
