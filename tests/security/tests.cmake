# Transport security (TLS, mutual TLS, worker identity, --insecure) against real processes.
if(TARGET ringmaster-scheduler)
  ringmaster_test(transport_security_test integration
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/../scheduler/harness.cc
      ${CMAKE_CURRENT_LIST_DIR}/transport_security_test.cc
    LIBS ringmaster_test_support ringmaster_proto gRPC::grpc++ PkgConfig::PQXX)
  add_dependencies(transport_security_test ringmaster-scheduler ringmaster-metrics
    ringmaster-worker)
endif()

# Who may do what (tokens, roles, teams, audit) over every RPC of the scheduler's API.
if(TARGET ringmaster-scheduler)
  ringmaster_test(authz_test integration
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/../scheduler/harness.cc
      ${CMAKE_CURRENT_LIST_DIR}/authz_test.cc
    LIBS ringmaster_test_support ringmaster_proto gRPC::grpc++ PkgConfig::PQXX)
  add_dependencies(authz_test ringmaster-scheduler ringctl)
endif()

ringmaster_test(authz_core_test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/authz_core_test.cc
  LIBS ringmaster_scheduler_core ringmaster_common)
