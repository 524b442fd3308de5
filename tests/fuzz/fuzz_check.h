// The fuzz targets' one assertion: an invariant that fails is a crash libFuzzer saves and
// reports, with the condition's text and file:line (like CHECK; never compiled out).
#ifndef RINGMASTER_TESTS_FUZZ_FUZZ_CHECK_H_
#define RINGMASTER_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

#endif  // RINGMASTER_TESTS_FUZZ_FUZZ_CHECK_H_
