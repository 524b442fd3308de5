// Amounts counted in thousandths (a share of a GPU, JobSpec.gpu_share) as people read them.
#ifndef RINGMASTER_LIBS_COMMON_THOUSANDTHS_H_
#define RINGMASTER_LIBS_COMMON_THOUSANDTHS_H_

#include <cstdint>
#include <string>

namespace ringmaster {

// An exact decimal without trailing zeros: 250 -> "0.25", 1 -> "0.001", 1000 -> "1",
// 2500 -> "2.5". Not for negative amounts.
std::string ThousandthsText(int64_t thousandths);

}  // namespace ringmaster

#endif  // RINGMASTER_LIBS_COMMON_THOUSANDTHS_H_
