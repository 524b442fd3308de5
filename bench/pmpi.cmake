find_package(MPI COMPONENTS C)
if(MPI_C_FOUND)
  # A tight point-to-point loop for the PMPI library's per-call cost (pmpi_p2p_overhead.sh).
  add_executable(mpi_pingpong ${CMAKE_CURRENT_LIST_DIR}/mpi_pingpong.c)
  target_link_libraries(mpi_pingpong PRIVATE MPI::MPI_C)
endif()
