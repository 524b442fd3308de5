# The quickstart's placing of the admin token in the user's config directory
# (scripts/lib/user_token.sh): bash, no cluster.
add_test(NAME quickstart_user_token_test
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/user_token_test.sh)
set_tests_properties(quickstart_user_token_test PROPERTIES LABELS unit TIMEOUT 60)
