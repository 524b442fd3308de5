# The README's first command from a clean copy of the tree into a build directory of its own,
# then the user's own programs from a new shell (tests/quickstart/quickstart_test.sh). The
# suite builds every target into one directory, which hid a quickstart that did not build
# ringmaster-check; this test builds only what the quickstart builds. Its compiles are hits in
# the compiler cache the suite's build filled, given the same configure arguments.
# Serial: it starts a whole cluster on the quickstart's ports and builds with every core.
add_test(NAME quickstart_test
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/quickstart_test.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(quickstart_test PROPERTIES LABELS "e2e;quickstart" RUN_SERIAL TRUE
  TIMEOUT 1800 ENVIRONMENT "RINGMASTER_CMAKE_ARGS=-DRINGMASTER_WERROR=${RINGMASTER_WERROR}")
