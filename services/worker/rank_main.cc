// ringmaster-rank: the wrapper mpirun runs as every rank. See rank_wrapper.h.
#include <cstring>
#include <string>
#include <vector>

#include "rank_wrapper.h"

int main(int argc, char** argv) {
  int first = 1;
  if (first < argc && std::strcmp(argv[first], "--") == 0) ++first;
  return ringmaster::worker::RunRank(std::vector<std::string>(argv + first, argv + argc));
}
