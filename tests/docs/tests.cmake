# Every pointer into docs/ from code, comments and docs resolves: the files, the quoted sections
# and the anchors (tests/docs/references_test.py). Python's standard library and git only.
add_test(NAME docs_references_test
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/references_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(docs_references_test PROPERTIES LABELS unit TIMEOUT 60)
