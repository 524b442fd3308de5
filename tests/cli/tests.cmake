# ringctl: YAML specs, argument parsing, formatting, the command flow against a fake scheduler,
# the gRPC client against an in-process fake scheduler, and the built binary against an
# address where nothing listens. No external server needed.
ringmaster_test(cli_test unit
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/spec_yaml_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/args_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/config_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/format_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/app_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/client_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/ringctl_binary_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/logs_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/queue_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/registry_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/study_test.cc
  LIBS ringmaster_cli)
# status_test_util.h (header only).
target_include_directories(cli_test PRIVATE ${PROJECT_SOURCE_DIR}/tests)
# The binary test runs the built ringctl.
add_dependencies(cli_test ringctl)

# ringctl against a real cluster: submit --wait/--follow, list's paging and selectors, a
# scaling study of real trainer jobs, and every command's output checked against the
# scheduler's own answers (ringctl_output_test.cc).
if(TARGET ringmaster-scheduler AND TARGET ringmaster_test_support)
  ringmaster_test(ringctl_e2e_test e2e
    SOURCES
      ${CMAKE_CURRENT_LIST_DIR}/ringctl_e2e_test.cc
      ${CMAKE_CURRENT_LIST_DIR}/ringctl_output_test.cc
    LIBS ringmaster_test_cluster ringmaster_worker_client ringmaster_proto gRPC::grpc++
      PkgConfig::PQXX)
  add_dependencies(ringctl_e2e_test ringctl ringmaster-scheduler ringmaster-worker
    ringmaster-rsh ringmaster-rank ringmaster-train)
endif()

# --help and an unknown flag of every binary the project ships (install() rules and
# docker/Dockerfile), run as built: one layout, exit 0 and 2, and the environment fallbacks.
set(HELP_TEST_BINARIES)
set(HELP_TEST_TARGETS)
foreach(target ringctl ringmaster-scheduler ringmaster-worker ringmaster-metrics ringmaster-train
    ringmaster-check ringmaster-rsh ringmaster-rank ringmaster-progress ringmaster-sim)
  if(TARGET ${target})
    list(APPEND HELP_TEST_BINARIES "$<TARGET_FILE:${target}>")
    list(APPEND HELP_TEST_TARGETS ${target})
  endif()
endforeach()
list(JOIN HELP_TEST_BINARIES ":" HELP_TEST_BINARIES)
ringmaster_test(help_test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/help_test.cc ${CMAKE_CURRENT_LIST_DIR}/flags_test.cc
  LIBS ringmaster_test_support ringmaster_common)
target_compile_definitions(help_test PRIVATE RINGMASTER_HELP_BINARIES="${HELP_TEST_BINARIES}")
add_dependencies(help_test ${HELP_TEST_TARGETS})
