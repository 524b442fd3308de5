// GoogleTest helpers for absl::Status and absl::StatusOr: assert success with the status in
// the failure message, unwrap a value, match a code.
#ifndef RINGMASTER_TESTS_SUPPORT_STATUS_TEST_UTIL_H_
#define RINGMASTER_TESTS_SUPPORT_STATUS_TEST_UTIL_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::test {

inline absl::Status StatusOf(const absl::Status& status) { return status; }
template <typename T>
absl::Status StatusOf(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// EXPECT_THAT(store.GetJob("x"), StatusIs(absl::StatusCode::kNotFound)); on a mismatch the
// message shows the whole status.
MATCHER_P(StatusIs, code, "") {
  absl::Status status = ::ringmaster::test::StatusOf(arg);
  *result_listener << "whose status is " << status;
  return status.code() == code;
}

// EXPECT_THAT(lease.Hold("s1", 1000), IsOkAndHolds(true)): an OK StatusOr holding `value`.
MATCHER_P(IsOkAndHolds, value, "") {
  if (!arg.ok()) {
    *result_listener << "whose status is " << arg.status();
    return false;
  }
  *result_listener << "holding " << ::testing::PrintToString(*arg);
  return *arg == value;
}

}  // namespace ringmaster::test

#define RM_TEST_CONCAT_INNER_(a, b) a##b
#define RM_TEST_CONCAT_(a, b) RM_TEST_CONCAT_INNER_(a, b)

// ASSERT_/EXPECT_ that a Status or StatusOr is OK; the failure message shows the status.
#define RM_ASSERT_OK(expr)                                                     \
  do {                                                                         \
    const ::absl::Status rm_test_status_ = ::ringmaster::test::StatusOf(expr); \
    ASSERT_TRUE(rm_test_status_.ok()) << rm_test_status_;                      \
  } while (false)
#define RM_EXPECT_OK(expr)                                                     \
  do {                                                                         \
    const ::absl::Status rm_test_status_ = ::ringmaster::test::StatusOf(expr); \
    EXPECT_TRUE(rm_test_status_.ok()) << rm_test_status_;                      \
  } while (false)

// `RM_ASSERT_OK_AND_ASSIGN(auto x, F())`: asserts F() is OK and moves its value into x.
#define RM_ASSERT_OK_AND_ASSIGN(lhs, expr) \
  RM_ASSERT_OK_AND_ASSIGN_IMPL_(RM_TEST_CONCAT_(rm_test_statusor_, __LINE__), lhs, expr)
#define RM_ASSERT_OK_AND_ASSIGN_IMPL_(var, lhs, expr) \
  auto var = (expr);                                  \
  ASSERT_TRUE(var.ok()) << var.status();              \
  lhs = std::move(var).value()

#endif  // RINGMASTER_TESTS_SUPPORT_STATUS_TEST_UTIL_H_
