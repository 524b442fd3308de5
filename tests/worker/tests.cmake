# Worker: core decisions (unit) and whole clusters of real processes (e2e).
ringmaster_test(worker_core_test unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/launch_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/gang_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/throughput_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/inventory_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/health_check_test.cc
  LIBS ringmaster_worker_core)

if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support)
  ringmaster_test(worker_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/cluster.cc
      ${CMAKE_CURRENT_LIST_DIR}/worker_e2e_test.cc
      ${PROJECT_SOURCE_DIR}/tests/scheduler/harness.cc
    LIBS ringmaster_test_support ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(worker_e2e_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank)
  foreach(target ringmaster-train ringctl)
    if(TARGET ${target})
      add_dependencies(worker_e2e_test ${target})
    endif()
  endforeach()
endif()

# The worker's host layer (files, /proc, pipes, ports) and its Agent driven directly.
ringmaster_test(worker_host_test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/host_test.cc
  LIBS ringmaster_worker_host)
ringmaster_test(worker_agent_test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/agent_test.cc
  LIBS ringmaster_worker_lib)

if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support)
  # Bursts of short jobs against real workers; about a minute on two cores.
  ringmaster_test(worker_stress_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/cluster.cc
      ${CMAKE_CURRENT_LIST_DIR}/stress_e2e_test.cc
      ${PROJECT_SOURCE_DIR}/tests/scheduler/harness.cc
    LIBS ringmaster_test_support ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(worker_stress_e2e_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank)
endif()

if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support)
  # Two teams, one cohort: reclaim of a borrower's whole gang, with real rings.
  ringmaster_test(preemption_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/cluster.cc
      ${CMAKE_CURRENT_LIST_DIR}/preemption_e2e_test.cc
      ${PROJECT_SOURCE_DIR}/tests/scheduler/harness.cc
    LIBS ringmaster_test_support ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(preemption_e2e_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank)
endif()

if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support)
  # The pre-run allreduce check with real rings: a slow worker found, excluded, the job placed
  # elsewhere. About 20 s.
  ringmaster_test(health_check_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/cluster.cc
      ${CMAKE_CURRENT_LIST_DIR}/health_check_e2e_test.cc
      ${PROJECT_SOURCE_DIR}/tests/scheduler/harness.cc
    LIBS ringmaster_test_support ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(health_check_e2e_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank ringmaster-check)
endif()
