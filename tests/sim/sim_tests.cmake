# The simulation (sim/): the simulated device's clocks and the stage table, the memory-bound stages' times, the
# calibration file and its fits, and the communicator's costs on two MPI ranks here; the simulated build itself
# (build-sim/spbench, made by scripts/sim.sh build, which scripts/test.sh runs first) under smpirun at 4 and 16
# simulated ranks (sim_run.sh: exit 77, skipped, where it was not built).
foreach(source sim_device sim_kernels sim_runtime calibration)  # tests/sim/test_<source>.cpp, test sim.<part>
  string(REGEX REPLACE "^sim_" "" part ${source})
  spb_test(test_${source} sim/test_${source}.cpp)
  target_link_libraries(test_${source} PRIVATE spb_sim)
  add_test(NAME sim.${part} COMMAND test_${source})
endforeach()
spb_mpi_test(test_sim_comm sim/test_sim_comm.cpp)
target_link_libraries(test_sim_comm PRIVATE spb_sim)
add_test(NAME sim.comm.np2 COMMAND ${SPB_MPIEXEC} 2 ${SPB_MPI_FLAGS} $<TARGET_FILE:test_sim_comm>)

set(SPB_SIM_RUN ${CMAKE_CURRENT_SOURCE_DIR}/sim/sim_run.sh ${CMAKE_SOURCE_DIR})
foreach(np 4 16)
  add_test(NAME sim.smoke.np${np} COMMAND ${SPB_SIM_RUN} smoke ${np} ${CMAKE_CURRENT_BINARY_DIR}/sim_np${np})
  set_tests_properties(sim.smoke.np${np} PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS sim)
endforeach()
add_test(NAME sim.cpu_check.np4 COMMAND ${SPB_SIM_RUN} cpu_check 4 ${CMAKE_CURRENT_BINARY_DIR}/sim_cpu_np4)
set_tests_properties(sim.cpu_check.np4 PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS sim)
set_tests_properties(sim.smoke.np4 sim.smoke.np16 PROPERTIES PASS_REGULAR_EXPRESSION "SIM_SMOKE_OK")
set_tests_properties(sim.cpu_check.np4 PROPERTIES PASS_REGULAR_EXPRESSION "SIM_CPU_CHECK_OK")
# The collective level's two timings under SMPI: the chain's latency at 16 and 32 ranks of DGX H100 nodes.
add_test(NAME sim.timing.np16 COMMAND ${SPB_SIM_RUN} timing 16 ${CMAKE_CURRENT_BINARY_DIR}/sim_timing_np16)
set_tests_properties(sim.timing.np16 PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS sim
                     PASS_REGULAR_EXPRESSION "SIM_TIMING_OK")
add_test(NAME sim.network.np16 COMMAND ${SPB_SIM_RUN} network 16 ${CMAKE_CURRENT_BINARY_DIR}/sim_network_np16)
set_tests_properties(sim.network.np16 PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS sim
                     PASS_REGULAR_EXPRESSION "SIM_NETWORK_OK")
# Gated DeltaNet's stage table recorded on one CPU rank of the simulated build, replayed at 16 simulated ranks (two
# DGX H100 nodes), and a key it lacks.
add_test(NAME sim.gdn.np16 COMMAND ${SPB_SIM_RUN} gdn 16 ${CMAKE_CURRENT_BINARY_DIR}/sim_gdn_np16)
set_tests_properties(sim.gdn.np16 PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS sim
                     PASS_REGULAR_EXPRESSION "SIM_GDN_OK")
# A stage table lacking a stage that one rank's work alone needs: that rank's error, printed once with its rank, ends
# the simulated job (exit 2) instead of leaving its peers to deadlock.
add_test(NAME sim.rank_error.np4 COMMAND ${SPB_SIM_RUN} rank_error 4 ${CMAKE_CURRENT_BINARY_DIR}/sim_rank_error_np4)
set_tests_properties(sim.rank_error.np4 PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS sim
                     PASS_REGULAR_EXPRESSION "SIM_RANK_ERROR_OK")
add_test(NAME sim.model.np4 COMMAND ${SPB_SIM_RUN} model 4 ${CMAKE_CURRENT_BINARY_DIR}/sim_model_np4)
set_tests_properties(sim.model.np4 PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77 LABELS sim
                     PASS_REGULAR_EXPRESSION "SIM_MODEL_OK")
# The model's recording kernels (sim/model_stage_table.h): the same step through them, every call recorded by stage
# and shape, and a model whose kernels do not compute; at 1 and 2 ranks.
spb_mpi_test(test_model_stage_table sim/test_model_stage_table.cpp spb_sim spb_model)
foreach(np 1 2)
  add_test(NAME sim.model_stage_table.np${np}
           COMMAND ${SPB_MPIEXEC} ${np} ${SPB_MPI_FLAGS} $<TARGET_FILE:test_model_stage_table>)
endforeach()
# Gated DeltaNet's stage table and its replay (sim/stage_table_gdn.h, sim/sim_gdn_kernels.cpp): every GDN method's
# calls recorded on CPU ranks, replayed by the simulated kernels from that table, and a key it lacks; at 1 and 2 ranks.
spb_mpi_test(test_sim_gdn_kernels sim/test_sim_gdn_kernels.cpp spb_sim)
foreach(np 1 2)
  add_test(NAME sim.gdn_kernels.np${np}
           COMMAND ${SPB_MPIEXEC} ${np} ${SPB_MPI_FLAGS} $<TARGET_FILE:test_sim_gdn_kernels>)
endforeach()
# The model's simulated kernels (sim/sim_model_kernels.h): every call of a tiny model's dp and zeco steps found in the
# table its recorder wrote; at 1 and 2 ranks.
spb_mpi_test(test_sim_model_kernels sim/test_sim_model_kernels.cpp spb_sim spb_model)
foreach(np 1 2)
  add_test(NAME sim.model_kernels.np${np}
           COMMAND ${SPB_MPIEXEC} ${np} ${SPB_MPI_FLAGS} $<TARGET_FILE:test_sim_model_kernels>)
endforeach()
# The simulated model level under `--recompute=blocks` (what the long-context sweep runs): a tiny model's step at
# blocks (dp, zeco, lasp2, lasp1) and none (zeco), recorded on CPU ranks, then replayed over the simulated model
# kernels: the same model and GLA stage calls, each found in the table; at 1 and 2 ranks.
spb_mpi_test(test_sim_model_recompute sim/test_sim_model_recompute.cpp spb_sim spb_model)
foreach(np 1 2)
  add_test(NAME sim.model_recompute.np${np}
           COMMAND ${SPB_MPIEXEC} ${np} ${SPB_MPI_FLAGS} $<TARGET_FILE:test_sim_model_recompute>)
endforeach()
