#include "common/thousandths.h"

#include "absl/strings/str_cat.h"

namespace ringmaster {

std::string ThousandthsText(int64_t thousandths) {
  const int64_t whole = thousandths / 1000;
  const int64_t fraction = thousandths % 1000;
  if (fraction == 0) return absl::StrCat(whole);
  // Three digits, then the trailing zeros dropped: 250 -> "250" -> "25".
  std::string digits = absl::StrCat(fraction + 1000).substr(1);
  while (digits.back() == '0') digits.pop_back();
  return absl::StrCat(whole, ".", digits);
}

}  // namespace ringmaster
