ringmaster_test(metrics_core_test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/job_metrics_test.cc
  LIBS ringmaster_metrics_core)

ringmaster_test(metrics_service_test integration
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/metrics_service_test.cc
  LIBS ringmaster_test_support ringmaster_proto gRPC::grpc++)
add_dependencies(metrics_service_test ringmaster-metrics)
