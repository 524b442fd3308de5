# Worker: core decisions (unit) and whole clusters of real processes (e2e).
ringmaster_test(worker_core_test unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/launch_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/gang_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/throughput_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/inventory_test.cc
  LIBS ringmaster_worker_core)
