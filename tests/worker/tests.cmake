# Worker: core decisions (unit) and whole clusters of real processes (e2e).
ringmaster_test(worker_core_test unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/launch_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/gang_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/throughput_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/inventory_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/progress_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/health_check_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/run_as_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/teardown_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/assignment_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/layout_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/container_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/gpu_share_test.cc
  LIBS ringmaster_worker_core)

if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support)
  ringmaster_test(worker_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/worker_e2e_test.cc
    LIBS ringmaster_test_cluster ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(worker_e2e_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank)
  foreach(target ringmaster-train ringctl)
    if(TARGET ${target})
      add_dependencies(worker_e2e_test ${target})
    endif()
  endforeach()
endif()

# Jobs in their own images: ranks in Podman containers, pulled from a registry on loopback.
if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support)
  ringmaster_test(container_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/container_e2e_test.cc
    LIBS ringmaster_test_cluster ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(container_e2e_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank ringmaster-check)
  set_tests_properties(container_e2e_test PROPERTIES TIMEOUT 900)
endif()

# The worker's host layer (files, /proc, pipes, ports) and its Agent driven directly.
ringmaster_test(worker_host_test unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/host_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/rank_channel_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/helpers_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/mps_daemon_test.cc
  LIBS ringmaster_worker_host)
if(TARGET ringmaster_pmpi)
  # The counter in a real (1-rank) MPI program with many nonblocking collectives in flight.
  add_executable(nonblocking_collectives ${CMAKE_CURRENT_LIST_DIR}/programs/nonblocking_collectives.c)
  target_link_libraries(nonblocking_collectives PRIVATE MPI::MPI_C)
  target_compile_definitions(worker_host_test PRIVATE
    RINGMASTER_PMPI_LIBRARY="$<TARGET_FILE:ringmaster_pmpi>"
    RINGMASTER_NONBLOCKING_COLLECTIVES="$<TARGET_FILE:nonblocking_collectives>")
  add_dependencies(worker_host_test ringmaster_pmpi nonblocking_collectives)
endif()
# libringmaster_nccl.so preloaded into a program whose NCCL and CUDA driver are fakes that
# say when the "GPU" got through (nccl_counter_check.c).
if(TARGET ringmaster_nccl)
  add_library(fake_nccl_cuda SHARED ${CMAKE_CURRENT_LIST_DIR}/fake_nccl_cuda.c)
  add_executable(nccl_counter_check ${CMAKE_CURRENT_LIST_DIR}/nccl_counter_check.c)
  target_include_directories(nccl_counter_check PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(nccl_counter_check PRIVATE fake_nccl_cuda ringmaster_rank_contract)
  add_dependencies(nccl_counter_check ringmaster_nccl)
  add_test(NAME nccl_counter_test
    COMMAND nccl_counter_check ${CMAKE_CURRENT_BINARY_DIR}/nccl_counter_test.channel)
  set_tests_properties(nccl_counter_test PROPERTIES LABELS unit TIMEOUT 30
    ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:ringmaster_nccl>;ASAN_OPTIONS=verify_asan_link_order=0")
endif()
ringmaster_test(worker_agent_test unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/agent_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/gpu_metrics_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/convert_test.cc
  LIBS ringmaster_worker_lib)

ringmaster_test(worker_image_puller_test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/image_puller_test.cc
  LIBS ringmaster_worker_lib)

if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support)
  # Bursts of short jobs against real workers; about a minute on two cores.
  ringmaster_test(worker_stress_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/stress_e2e_test.cc
    LIBS ringmaster_test_cluster ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(worker_stress_e2e_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank)
  # It saturates the machine on purpose: alongside it, the pre-run check's timing (which worker
  # the ring waited for) drowned in the noise and health_check_e2e_test failed 3 of 3 cases.
  set_tests_properties(worker_stress_e2e_test PROPERTIES RUN_SERIAL TRUE)
endif()

if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support)
  # Two teams, one cohort: reclaim of a borrower's whole gang, with real rings.
  ringmaster_test(preemption_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/preemption_e2e_test.cc
    LIBS ringmaster_test_cluster ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(preemption_e2e_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank)

  ringmaster_test(elastic_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/elastic_e2e_test.cc
    LIBS ringmaster_test_cluster ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(elastic_e2e_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank)

  ringmaster_test(gpu_share_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/gpu_share_e2e_test.cc
    LIBS ringmaster_test_cluster ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(gpu_share_e2e_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank ringmaster-train)
endif()

if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support AND TARGET ringmaster-train)
  # ringmaster-train killed (SIGKILL of a rank) and preempted (SIGTERM), resumed by the platform
  # from its checkpoints with the weights of an uninterrupted run; about 25 s.
  ringmaster_test(checkpoint_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/checkpoint_e2e_test.cc
    LIBS ringmaster_test_cluster ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(checkpoint_e2e_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank ringmaster-train)
endif()

if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support AND TARGET ringmaster_pmpi)
  # Watched while it runs: a stalled allreduce and a SIGSTOPped trainer rank are found hung
  # and named, an idle job is cancelled, ringmaster-progress keeps a job alive. About 30 s.
  find_package(MPI COMPONENTS C REQUIRED)
  add_executable(stalled_allreduce ${CMAKE_CURRENT_LIST_DIR}/programs/stalled_allreduce.c)
  target_link_libraries(stalled_allreduce PRIVATE MPI::MPI_C)
  ringmaster_test(run_watch_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/run_watch_e2e_test.cc
    LIBS ringmaster_test_cluster ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  target_compile_definitions(run_watch_e2e_test PRIVATE
    RINGMASTER_STALLED_ALLREDUCE="$<TARGET_FILE:stalled_allreduce>")
  add_dependencies(run_watch_e2e_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank ringmaster_pmpi ringmaster-progress stalled_allreduce)
  if(TARGET ringmaster-train)
    add_dependencies(run_watch_e2e_test ringmaster-train)
  endif()
endif()

if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support)
  # The pre-run allreduce check with real rings: a slow worker found, excluded, the job placed
  # elsewhere. About 20 s.
  ringmaster_test(health_check_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/health_check_e2e_test.cc
    LIBS ringmaster_test_cluster ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(health_check_e2e_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank ringmaster-check)
  if(TARGET stalled_allreduce)
    # A plain MPI program whose spec says it calls MPI_Init is checked there too.
    target_compile_definitions(health_check_e2e_test PRIVATE
      RINGMASTER_STALLED_ALLREDUCE="$<TARGET_FILE:stalled_allreduce>")
    add_dependencies(health_check_e2e_test ringmaster_pmpi stalled_allreduce)
  endif()
endif()

if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support)
  # Teams' ranks as their Unix users (worker --run-as); skips unless run as root.
  ringmaster_test(worker_run_as_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/run_as_e2e_test.cc
    LIBS ringmaster_test_cluster ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(worker_run_as_e2e_test ringmaster-scheduler ringmaster-worker ringmaster-rsh
    ringmaster-rank ringmaster-check)
endif()
