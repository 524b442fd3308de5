# libs/common: pure helpers.
ringmaster_test(common_test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/utf8_test.cc ${CMAKE_CURRENT_LIST_DIR}/log_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/thousandths_test.cc ${CMAKE_CURRENT_LIST_DIR}/secret_box_test.cc
  LIBS ringmaster_common)
# support/status_test_util.h (header only).
target_include_directories(common_test PRIVATE ${PROJECT_SOURCE_DIR}/tests)
# Job tokens against real certificates (made with scripts/lib/dev_certs.sh, as the quickstart's).
if(TARGET ringmaster_test_support)
  ringmaster_test(job_token_test unit
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/job_token_test.cc
    LIBS ringmaster_test_support ringmaster_common)
endif()
