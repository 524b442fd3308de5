// Status helpers shared by every component.
#ifndef RINGMASTER_LIBS_COMMON_STATUS_MACROS_H_
#define RINGMASTER_LIBS_COMMON_STATUS_MACROS_H_

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RM_CONCAT_INNER_(a, b) a##b
#define RM_CONCAT_(a, b) RM_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define RM_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    ::absl::Status rm_status_ = (expr);          \
    if (!rm_status_.ok()) return rm_status_;     \
  } while (false)

// `RM_ASSIGN_OR_RETURN(auto x, F())` assigns the value of a StatusOr or returns its status.
#define RM_ASSIGN_OR_RETURN(lhs, expr) \
  RM_ASSIGN_OR_RETURN_IMPL_(RM_CONCAT_(rm_statusor_, __LINE__), lhs, expr)
#define RM_ASSIGN_OR_RETURN_IMPL_(var, lhs, expr) \
  auto var = (expr);                              \
  if (!var.ok()) return var.status();             \
  lhs = std::move(var).value()

// Aborts on a broken invariant: programmer errors only, never input from outside.
#define RM_CHECK(cond)                                                               \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                  \
    }                                                                                \
  } while (false)

#endif  // RINGMASTER_LIBS_COMMON_STATUS_MACROS_H_
