# Chaos: a whole cluster of real processes under kill -9 and restarts (e2e).
if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support)
  ringmaster_test(chaos_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/chaos_test.cc
    LIBS ringmaster_test_cluster ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(chaos_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank)
endif()
