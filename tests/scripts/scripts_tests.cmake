# The sweep scripts under faults (tests/scripts/*.sh, CPU ranks at np 2 through scripts/sweep_cpu.sh's SPB_CPU_*
# settings): SIGINT and SIGTERM while a sweep runs, a sweep whose every configuration fails, and a rerun that resumes
# (scripts.sweep_resume, fault-free, in the same label).
set(spb_scripts_tests)
foreach(sig INT TERM)
  add_test(NAME scripts.sweep_sig${sig}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/sweep_signal.sh $<TARGET_FILE_DIR:spbench> ${sig})
  list(APPEND spb_scripts_tests scripts.sweep_sig${sig})
endforeach()
add_test(NAME scripts.sweep_all_fail
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/sweep_all_fail.sh $<TARGET_FILE_DIR:spbench>)
list(APPEND spb_scripts_tests scripts.sweep_all_fail)
add_test(NAME scripts.sweep_resume
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/sweep_resume.sh $<TARGET_FILE_DIR:spbench>)
set_tests_properties(${spb_scripts_tests} PROPERTIES TIMEOUT 60 LABELS fault)
# it measures one configuration: slower than the others where the machine is busy
set_tests_properties(scripts.sweep_resume PROPERTIES TIMEOUT 120 LABELS fault)
