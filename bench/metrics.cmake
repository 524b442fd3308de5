add_executable(metrics_bench ${CMAKE_CURRENT_LIST_DIR}/metrics_bench.cc)
target_link_libraries(metrics_bench PRIVATE ringmaster_metrics_decode ringmaster_proto gRPC::grpc++
  absl::strings)
