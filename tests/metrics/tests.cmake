ringmaster_test(metrics_core_test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/job_metrics_test.cc
  LIBS ringmaster_metrics_core)
