/* ringmaster-progress STEP [IMAGES_PER_SEC]: a command workload's way to report its progress
 * to the platform. It writes the rank's channel (rank_channel.h), which the rank wrapper reads
 * and reports; a step report counts as progress for hang detection, an images/sec value as
 * throughput for idle reclaim. Outside a Ringmaster rank (no RINGMASTER_RANK_CHANNEL) it
 * says so and exits 0, so scripts that call it also run elsewhere. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "rank_channel.h"

static int usage(const char* why) {
  fprintf(stderr,
          "ringmaster-progress: %s\nusage: ringmaster-progress STEP [IMAGES_PER_SEC]\n"
          "  STEP: the step the workload reached, an integer 0..2^63-1\n"
          "  IMAGES_PER_SEC: its current throughput, a finite number >= 0\n",
          why);
  return 2;
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) return usage("expected 1 or 2 arguments");
  char* end = NULL;
  errno = 0;
  long long step = strtoll(argv[1], &end, 10);
  if (errno != 0 || end == argv[1] || *end != '\0' || step < 0) {
    return usage("STEP: not an integer >= 0");
  }
  double ips = 0;
  if (argc == 3) {
    errno = 0;
    ips = strtod(argv[2], &end);
    if (errno != 0 || end == argv[2] || *end != '\0' || !isfinite(ips) || ips < 0) {
      return usage("IMAGES_PER_SEC: not a finite number >= 0");
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
