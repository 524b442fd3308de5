ringmaster_test(scheduler_core_test unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/placement_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/job_state_machine_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/validation_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/environment_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/fair_share_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/job_list_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/run_watch_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/event_cursor_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/health_check_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/dependency_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/array_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/share_placement_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/gpu_share_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/worker_protocol_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/elastic_test.cc
  LIBS ringmaster_scheduler_core)

if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support)
  ringmaster_test(scheduler_integration_test integration
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/harness.cc
      ${CMAKE_CURRENT_LIST_DIR}/scheduler_integration_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/queue_integration_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/registry_secrets_integration_test.cc
    LIBS ringmaster_test_support ringmaster_proto gRPC::grpc++ PkgConfig::PQXX)
  add_dependencies(scheduler_integration_test ringmaster-scheduler)
endif()

ringmaster_test(scheduler_unit_test unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/scheduler_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/log_relay_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/registry_credentials_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/../store/fault_injecting_job_store.cc
  LIBS ringmaster_scheduler_lib ringmaster_test_support)

ringmaster_test(scheduler_sim_test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/sim_test.cc
  LIBS ringmaster_scheduler_sim)
target_compile_definitions(scheduler_sim_test PRIVATE
  RINGMASTER_TESTDATA_DIR="${CMAKE_CURRENT_LIST_DIR}/testdata")
