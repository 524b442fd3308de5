# The test harness's own tests: it starts real processes and databases, hence `integration`.
ringmaster_test(test_support_test integration
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test/harness_test.cc
  LIBS ringmaster_test_support)
