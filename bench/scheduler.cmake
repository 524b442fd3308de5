add_executable(placement_bench ${CMAKE_CURRENT_LIST_DIR}/placement_bench.cc)
target_link_libraries(placement_bench PRIVATE ringmaster_scheduler_core)

add_executable(submit_bench ${CMAKE_CURRENT_LIST_DIR}/submit_bench.cc)
target_link_libraries(submit_bench PRIVATE ringmaster_common ringmaster_proto gRPC::grpc++
  PkgConfig::PQXX absl::strings)

find_package(MPI COMPONENTS CXX)
if(MPI_FOUND)
  add_executable(mpi_allreduce_baseline ${CMAKE_CURRENT_LIST_DIR}/mpi_allreduce_baseline.cc)
  target_link_libraries(mpi_allreduce_baseline PRIVATE MPI::MPI_CXX)
endif()

add_executable(placement_e2e_bench ${CMAKE_CURRENT_LIST_DIR}/placement_e2e_bench.cc)
target_link_libraries(placement_e2e_bench PRIVATE ringmaster_scheduler_core ringmaster_proto
  ringmaster_worker_host gRPC::grpc++ PkgConfig::PQXX absl::strings)

add_executable(watch_bench ${CMAKE_CURRENT_LIST_DIR}/watch_bench.cc)
target_link_libraries(watch_bench PRIVATE ringmaster_proto ringmaster_worker_host gRPC::grpc++
  PkgConfig::PQXX absl::strings)

add_executable(fair_share_bench ${CMAKE_CURRENT_LIST_DIR}/fair_share_bench.cc)
target_link_libraries(fair_share_bench PRIVATE ringmaster_scheduler_core)
add_executable(share_placement_bench ${CMAKE_CURRENT_LIST_DIR}/share_placement_bench.cc)
target_link_libraries(share_placement_bench PRIVATE ringmaster_scheduler_core)
