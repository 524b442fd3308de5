# libs/common: pure helpers.
ringmaster_test(common_test unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/utf8_test.cc
  LIBS ringmaster_common)
