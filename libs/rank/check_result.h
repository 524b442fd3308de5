/* The text a pre-run check leaves for its worker: written by ringmaster-check
 * (trainer/check_main.cc) and by the check inside MPI_Init (services/worker/pmpi/
 * ringmaster_pmpi.c), parsed by the worker (services/worker/core/health_check.cc,
 * ParseCheckResult). Plain C, header-only. One summary, then one line per rank in rank order:
 *
 *   transport cpu|gpu
 *   busbw_gbps 1.543860        the busbw of the fastest timed allreduce
 *   elapsed_seconds 0.999758   the whole check
 *   wrong 0                    elements the allreduces summed wrongly, over every rank
 *   rank 0 w1 0.000123         rank, its worker id ("-" when unknown), seconds it waited
 *
 * Written to PATH.tmp and renamed to PATH, so a reader never sees half of it. */
#ifndef RINGMASTER_LIBS_RANK_CHECK_RESULT_H_
#define RINGMASTER_LIBS_RANK_CHECK_RESULT_H_

/* printf formats: transport (string), busbw_gbps (double), elapsed_seconds (double), wrong
 * (long long); then per rank: rank (int), the worker id's length (int) and text, the wait
 * (double). */
#define RM_CHECK_RESULT_SUMMARY_FORMAT \
  "transport %s\nbusbw_gbps %.6f\nelapsed_seconds %.6f\nwrong %lld\n"
#define RM_CHECK_RESULT_RANK_FORMAT "rank %d %.*s %.6f\n"

/* The words that start each line, for the parser. */
#define RM_CHECK_KEY_TRANSPORT "transport"
#define RM_CHECK_KEY_BUSBW "busbw_gbps"
#define RM_CHECK_KEY_ELAPSED "elapsed_seconds"
#define RM_CHECK_KEY_WRONG "wrong"
#define RM_CHECK_KEY_RANK "rank"
/* A rank whose worker id is unknown. */
#define RM_CHECK_NO_WORKER_ID "-"

#endif /* RINGMASTER_LIBS_RANK_CHECK_RESULT_H_ */
