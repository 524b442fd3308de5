// ringctl: the command-line client of the Ringmaster scheduler. See docs/ringctl.md.
#include <iostream>
#include <string>
#include <vector>

#include "app.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return ringmaster::cli::RunCli(args, ringmaster::cli::ProcessRuntime(), std::cout, std::cerr);
}
