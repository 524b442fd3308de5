/* ringmaster-progress STEP [IMAGES_PER_SEC]: a command workload's way to report its progress
 * to the platform. It writes the rank's channel (rank_channel.h), which the rank wrapper reads
 * and reports; a step report counts as progress for hang detection, an images/sec value as
 * throughput for idle reclaim. Outside a Ringmaster rank (no RINGMASTER_RANK_CHANNEL) it
 * says so and exits 0, so scripts that call it also run elsewhere. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rank/rank_channel.h"

/* C, so no CLI11: the same --help layout and one-line errors as the C++ binaries
 * (libs/common/flags.h), by hand. */
static int usage_error(const char* why) {
  fprintf(stderr, "ringmaster-progress: %s (see ringmaster-progress --help)\n", why);
  return 2;
}

static int help(void) {
  printf(
      "Usage: ringmaster-progress [flags] STEP [IMAGES_PER_SEC]\n"
      "Reports a command workload's progress to the platform (hang detection, idle reclaim).\n"
      "\n"
      "STEP: the step the workload reached, an integer 0..2^63-1; IMAGES_PER_SEC: its current\n"
      "throughput, a finite number >= 0. Outside a Ringmaster rank it reports nothing, exit 0.\n"
      "\n"
      "Flags (environment fallback, default):\n"
      "  -h, --help\n"
      "      print this help and exit\n"
      "\n"
      "Environment:\n"
      "  %s\n"
      "      the rank's channel, set by ringmaster-rank\n",
      RM_RANK_CHANNEL_ENV);
  return 0;
}

int main(int argc, char** argv) {
  int first = 1;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (strcmp(arg, "--") == 0) {
      if (i == 1) first = 2;
      break;
    }
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) return help();
    /* "-5" is a (bad) STEP, not a flag. */
    if (arg[0] == '-' && arg[1] != '\0' && (arg[1] < '0' || arg[1] > '9')) {
      char why[128];
      snprintf(why, sizeof why, "unknown flag %.*s", (int)strcspn(arg, "="), arg);
      return usage_error(why);
    }
  }
  argc -= first - 1;
  argv += first - 1;
  if (argc < 2 || argc > 3) return usage_error("expected STEP [IMAGES_PER_SEC]");
  char* end = NULL;
  errno = 0;
  long long step = strtoll(argv[1], &end, 10);
  if (errno != 0 || end == argv[1] || *end != '\0' || step < 0) {
    return usage_error("STEP: not an integer >= 0");
  }
  double ips = 0;
  if (argc == 3) {
    errno = 0;
    ips = strtod(argv[2], &end);
    if (errno != 0 || end == argv[2] || *end != '\0' || !isfinite(ips) || ips < 0) {
      return usage_error("IMAGES_PER_SEC: not a finite number >= 0");
    }
  }
  struct rm_rank_channel* ch = rm_rank_channel_open(NULL);
  if (ch == NULL) {
    fprintf(stderr,
            "ringmaster-progress: not in a Ringmaster rank (%s unset or unreadable); "
            "nothing reported\n",
            RM_RANK_CHANNEL_ENV);
    return 0;
  }
  rm_rank_channel_report_progress(ch, (uint64_t)step, argc == 3, ips);
  return 0;
}
