ringmaster_test(scheduler_core_test unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/placement_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/job_state_machine_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/validation_test.cc
  LIBS ringmaster_scheduler_core)
