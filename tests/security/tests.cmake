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

# Hostile bytes (random and truncated frames on every port, random messages into every RPC)
# against a real cluster; bounded (a fixed number of rounds). OpenSSL opens the TLS sessions
# whose insides are garbage.
find_package(OpenSSL)
if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support AND OPENSSL_FOUND)
  ringmaster_test(hostile_bytes_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/hostile_bytes_test.cc
    LIBS ringmaster_test_cluster ringmaster_worker_client ringmaster_proto gRPC::grpc++
      ringmaster_scheduler_core PkgConfig::PQXX OpenSSL::SSL)
  add_dependencies(hostile_bytes_test ringmaster-scheduler ringmaster-worker ringmaster-metrics
    ringmaster-rsh ringmaster-rank)
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
