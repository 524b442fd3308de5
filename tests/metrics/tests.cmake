ringmaster_test(metrics_core_test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/job_metrics_test.cc ${CMAKE_CURRENT_LIST_DIR}/sample_decode_test.cc
  LIBS ringmaster_metrics_decode)

ringmaster_test(metrics_service_test integration
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/metrics_service_test.cc
  LIBS ringmaster_test_support ringmaster_trainer_metrics ringmaster_proto gRPC::grpc++)
add_dependencies(metrics_service_test ringmaster-metrics)

if(TARGET ringmaster-worker AND TARGET ringmaster-scheduler)
  ringmaster_test(prometheus_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/prometheus_e2e_test.cc
    LIBS ringmaster_test_cluster ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(prometheus_e2e_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank ringmaster-train ringmaster-metrics)
endif()
