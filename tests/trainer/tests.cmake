# ringmaster-train: unit tests (one GoogleTest binary, no MPI, no GPU) and multi-rank runs of
# the real binary under mpirun (integration), plus one GPU run that skips without a GPU.
if(TARGET ringmaster_trainer_core)
  set(_trainer_tests ${CMAKE_CURRENT_LIST_DIR})
  ringmaster_test(trainer_test unit
    SOURCES
      ${_trainer_tests}/allreduce_benchmark_test.cc
      ${_trainer_tests}/checkpoint_test.cc
      ${_trainer_tests}/communicator_test.cc
      ${_trainer_tests}/config_test.cc
      ${_trainer_tests}/cpu_compute_test.cc
      ${_trainer_tests}/gradient_buckets_test.cc
      ${_trainer_tests}/memory_estimate_test.cc
      ${_trainer_tests}/mlp_test.cc
      ${_trainer_tests}/optimizer_test.cc
      ${_trainer_tests}/trainer_test.cc
    LIBS ringmaster_trainer_core)
  target_include_directories(trainer_test PRIVATE ${PROJECT_SOURCE_DIR})

  # check_train.sh runs mpirun with the loopback flags and judges the output.
  set(_check ${_trainer_tests}/check_train.sh)
  set(_train $<TARGET_FILE:ringmaster-train>)
  add_test(NAME trainer_mpi_train_2_ranks
    COMMAND ${_check} train 2 ${_train} --model mlp-small --batch-size 32 --steps 30
      --data-batches 16 --log-every 10 --bucket-mb 2)
  add_test(NAME trainer_mpi_train_4_ranks
    COMMAND ${_check} train 4 ${_train} --model mlp-small --batch-size 16 --steps 30
      --data-batches 16 --log-every 10 --bucket-mb 1)
  add_test(NAME trainer_mpi_allreduce_benchmark_2_ranks
    COMMAND ${_check} allreduce 2 ${_train} --benchmark allreduce --max-bytes 1M --iters 3
      --warmup-iters 1)
  set_tests_properties(trainer_mpi_train_2_ranks trainer_mpi_train_4_ranks
    trainer_mpi_allreduce_benchmark_2_ranks PROPERTIES LABELS integration TIMEOUT 120)

  # A GPU share's memory limit (docs/gpu-sharing.md): the worker's RINGMASTER_GPU_MEMORY far
  # below what the run needs is refused at once, saying so; one well above it trains as usual.
  add_test(NAME trainer_mpi_gpu_memory_limit_refused
    COMMAND ${_check} over-memory 2 ${_train} --model mlp-small --batch-size 16 --steps 10
      --data-batches 4)
  set_tests_properties(trainer_mpi_gpu_memory_limit_refused PROPERTIES
    ENVIRONMENT "RINGMASTER_GPU_MEMORY=1048576;RINGMASTER_GPU_SHARE=0.25")
  add_test(NAME trainer_mpi_gpu_memory_limit_fits
    COMMAND ${_check} train 2 ${_train} --model mlp-small --batch-size 16 --steps 10
      --data-batches 4 --log-every 5)
  set_tests_properties(trainer_mpi_gpu_memory_limit_fits PROPERTIES
    ENVIRONMENT "RINGMASTER_GPU_MEMORY=67108864;RINGMASTER_GPU_SHARE=0.25")
  set_tests_properties(trainer_mpi_gpu_memory_limit_refused trainer_mpi_gpu_memory_limit_fits
    PROPERTIES LABELS integration TIMEOUT 120)

  # Elastic resizes, 2 -> 4 and 4 -> 2 ranks, against runs never resized (docs/trainer.md,
  # "Elastic jobs"); checkpoint_diff compares the weights of two checkpoint files.
  add_executable(checkpoint_diff ${_trainer_tests}/checkpoint_diff.cc)
  target_link_libraries(checkpoint_diff PRIVATE ringmaster_trainer_core)
  target_include_directories(checkpoint_diff PRIVATE ${PROJECT_SOURCE_DIR})
  set(_elastic ${_trainer_tests}/check_elastic.sh ${_train} $<TARGET_FILE:checkpoint_diff>)
  add_test(NAME trainer_mpi_elastic_2_to_4_ranks COMMAND ${_elastic} 2 4)
  add_test(NAME trainer_mpi_elastic_4_to_2_ranks COMMAND ${_elastic} 4 2)
  # The optimizer state carries over: SGD with momentum (at a stable learning rate).
  add_test(NAME trainer_mpi_elastic_2_to_4_ranks_momentum
    COMMAND ${_elastic} 2 4 --momentum 0.9 --lr 0.005)
  set_tests_properties(trainer_mpi_elastic_2_to_4_ranks trainer_mpi_elastic_4_to_2_ranks
    trainer_mpi_elastic_2_to_4_ranks_momentum PROPERTIES LABELS integration TIMEOUT 300)

  # The elastic command example (docs/examples/elastic_mpi4py.py) SIGTERMed at 2 ranks and
  # resumed at 4. It needs a python3 that imports mpi4py (Debian's python3-mpi4py); the first
  # that does is used, as tests/python does for its modules.
  if(NOT RINGMASTER_MPI4PY_PYTHON)
    find_program(_trainer_path_python python3)
    foreach(candidate /usr/bin/python3 ${_trainer_path_python})
      execute_process(COMMAND ${candidate} -c "import mpi4py"
        RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
      if(_rc EQUAL 0)
        set(RINGMASTER_MPI4PY_PYTHON ${candidate} CACHE FILEPATH
          "Python 3 with mpi4py, for the elastic command example's test")
        break()
      endif()
    endforeach()
  endif()
  if(RINGMASTER_MPI4PY_PYTHON)
    set(_python ${RINGMASTER_MPI4PY_PYTHON})
  else()
    # Not cached: the next configure looks again.
    set(_python /usr/bin/python3)
    message(WARNING "No python3 imports mpi4py: trainer_mpi_elastic_command_2_to_4_ranks will "
      "fail (apt-get install python3-mpi4py)")
  endif()
  add_test(NAME trainer_mpi_elastic_command_2_to_4_ranks
    COMMAND ${_trainer_tests}/check_elastic_command.sh ${_python}
      ${PROJECT_SOURCE_DIR}/docs/examples/elastic_mpi4py.py 2 4)
  set_tests_properties(trainer_mpi_elastic_command_2_to_4_ranks PROPERTIES LABELS integration
    TIMEOUT 300)

  if(RINGMASTER_HAVE_CUDA)
    # One rank: NCCL refuses two ranks on one GPU, and CI machines have at most one.
    add_test(NAME trainer_gpu_train_and_allreduce
      COMMAND ${_check} gpu 1 ${_train} --device gpu --model mlp --batch-size 128 --steps 30
        --log-every 10)
    set_tests_properties(trainer_gpu_train_and_allreduce PROPERTIES LABELS gpu TIMEOUT 300
      SKIP_RETURN_CODE 77)
  endif()
endif()
