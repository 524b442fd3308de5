# The Python client (python/ringmaster): its spec conversion and errors without a server
# (unit), and its whole API against a real cluster (e2e). Both run Debian's Python, which has
# python3-grpcio, python3-protobuf and python3-yaml (scripts/setup); a Python elsewhere on PATH
# (pyenv's, a venv) may lack them, so the first interpreter that imports all three is used.
if(NOT RINGMASTER_PYTHON)
  set(_candidates /usr/bin/python3)
  find_program(_path_python python3)
  if(_path_python)
    list(APPEND _candidates ${_path_python})
  endif()
  foreach(candidate ${_candidates})
    execute_process(COMMAND ${candidate} -c "import grpc, google.protobuf, yaml"
      RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
    if(_rc EQUAL 0)
      set(RINGMASTER_PYTHON ${candidate} CACHE FILEPATH
        "Python 3 with grpcio, protobuf and yaml, for the Python client's tests")
      break()
    endif()
  endforeach()
  if(NOT RINGMASTER_PYTHON)
    # Not cached: the next configure looks again (after scripts/setup installed them).
    set(RINGMASTER_PYTHON /usr/bin/python3)
    message(WARNING "No python3 imports grpc, google.protobuf and yaml: the Python client's "
      "tests will fail (scripts/setup installs python3-grpcio python3-protobuf python3-yaml)")
  endif()
endif()

if(TARGET ringmaster_python_stubs)
  add_test(NAME python_client_unit_test
    COMMAND ${RINGMASTER_PYTHON} -m unittest -v spec_test config_test package_test
    WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
  set_tests_properties(python_client_unit_test PROPERTIES LABELS unit TIMEOUT 120
    ENVIRONMENT "PYTHONPATH=${PROJECT_SOURCE_DIR}/python:${PROJECT_BINARY_DIR}/python;PYTHONDONTWRITEBYTECODE=1")

  if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support)
    ringmaster_test(python_client_e2e_test e2e
      SOURCES
        ${CMAKE_CURRENT_LIST_DIR}/client_e2e_test.cc
      LIBS ringmaster_test_cluster ringmaster_worker_client ringmaster_proto gRPC::grpc++
        PkgConfig::PQXX)
    target_compile_definitions(python_client_e2e_test PRIVATE
      RINGMASTER_PYTHON="${RINGMASTER_PYTHON}")
    add_dependencies(python_client_e2e_test ringmaster_python_stubs ringmaster-scheduler
      ringmaster-worker ringmaster-rsh ringmaster-rank)
  endif()
endif()
