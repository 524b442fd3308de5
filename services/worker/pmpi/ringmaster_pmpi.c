/* libringmaster_pmpi.so: counts the MPI collectives a rank enters and completes, for hang
 * detection (docs/health.md). The rank wrapper preloads it (LD_PRELOAD) into every rank.
 *
 * Each MPI_<collective> defined here bumps `collectives_entered`, calls PMPI_<collective> and
 * bumps `collectives_completed` when it returns; a nonblocking I<collective> is entered at its
 * call and completed when a Wait/Test call sees its request finish (set to MPI_REQUEST_NULL).
 * The counters live in the rank channel (rank_channel.h): one relaxed atomic add each, no
 * system call.
 *
 * Harmless elsewhere: every reference to Open MPI's symbols is weak, so the library loads into
 * programs without MPI (nothing here is ever called there), and a statically linked program
 * never sees it. Without a channel (RINGMASTER_RANK_CHANNEL unset) it counts into a private
 * page. Built against Debian's Open MPI 4.1 (its mpi.h); the ABI is Open MPI's. */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "rank_channel.h"

/* Weak: resolved to libmpi's when the program has it, NULL (and never used) otherwise. */
#pragma weak ompi_request_null
#pragma weak PMPI_Allreduce
#pragma weak PMPI_Reduce
#pragma weak PMPI_Bcast
#pragma weak PMPI_Barrier
#pragma weak PMPI_Allgather
#pragma weak PMPI_Allgatherv
#pragma weak PMPI_Alltoall
#pragma weak PMPI_Alltoallv
#pragma weak PMPI_Reduce_scatter
#pragma weak PMPI_Reduce_scatter_block
#pragma weak PMPI_Gather
#pragma weak PMPI_Gatherv
#pragma weak PMPI_Scatter
#pragma weak PMPI_Scatterv
#pragma weak PMPI_Scan
#pragma weak PMPI_Exscan
#pragma weak PMPI_Iallreduce
#pragma weak PMPI_Ireduce
#pragma weak PMPI_Ibcast
#pragma weak PMPI_Ibarrier
#pragma weak PMPI_Iallgather
#pragma weak PMPI_Iallgatherv
#pragma weak PMPI_Ialltoall
#pragma weak PMPI_Ialltoallv
#pragma weak PMPI_Ireduce_scatter
#pragma weak PMPI_Ireduce_scatter_block
#pragma weak PMPI_Igather
#pragma weak PMPI_Igatherv
#pragma weak PMPI_Iscatter
#pragma weak PMPI_Iscatterv
#pragma weak PMPI_Wait
#pragma weak PMPI_Test
#pragma weak PMPI_Waitall
#pragma weak PMPI_Testall
#pragma weak PMPI_Waitany
#pragma weak PMPI_Testany
#pragma weak PMPI_Waitsome
#pragma weak PMPI_Testsome

#define RM_EXPORT __attribute__((visibility("default")))

static struct rm_rank_channel* g_channel;
static struct rm_rank_channel g_private; /* counts go here when there is no channel */

static struct rm_rank_channel* Channel(void) {
  struct rm_rank_channel* ch = __atomic_load_n(&g_channel, __ATOMIC_ACQUIRE);
  if (__builtin_expect(ch != NULL, 1)) return ch;
  struct rm_rank_channel* opened = rm_rank_channel_open(NULL);
  if (opened == NULL) opened = &g_private;
  struct rm_rank_channel* expected = NULL;
  if (!__atomic_compare_exchange_n(&g_channel, &expected, opened, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    if (opened != &g_private) munmap(opened, RM_RANK_CHANNEL_SIZE);
    return expected;
  }
  return opened;
}

static inline void Entered(void) {
  __atomic_fetch_add(&Channel()->collectives_entered, 1, __ATOMIC_RELAXED);
}
static inline void Completed(uint64_t n) {
  __atomic_fetch_add(&Channel()->collectives_completed, n, __ATOMIC_RELAXED);
}

/* Nonblocking collectives in flight: their requests, so Wait/Test can tell them from
 * point-to-point ones. Wait/Test pay one relaxed load when none is in flight. */
#define RM_MAX_PENDING 4096
static pthread_mutex_t g_pending_mu = PTHREAD_MUTEX_INITIALIZER;
static MPI_Request g_pending[RM_MAX_PENDING];
static int g_pending_count; /* also read without the lock (relaxed) as a fast path */

static void Track(int rc, MPI_Request* request) {
  if (rc != MPI_SUCCESS || request == NULL) return;
  pthread_mutex_lock(&g_pending_mu);
  if (g_pending_count < RM_MAX_PENDING) {
    g_pending[g_pending_count] = *request;
    __atomic_store_n(&g_pending_count, g_pending_count + 1, __ATOMIC_RELAXED);
  } else {
    Completed(1); /* table full: count it done now rather than never */
  }
  pthread_mutex_unlock(&g_pending_mu);
}

/* Remembers which of `requests` are tracked collectives, before a Wait/Test overwrites them. */
struct Watched {
  int count;
  int index[64];
  MPI_Request handle[64];
};

static void Watch(int n, const MPI_Request* requests, struct Watched* w) {
  w->count = 0;
  if (__atomic_load_n(&g_pending_count, __ATOMIC_RELAXED) == 0 || requests == NULL) return;
  pthread_mutex_lock(&g_pending_mu);
  for (int i = 0; i < n && w->count < 64; ++i) {
    for (int j = 0; j < g_pending_count; ++j) {
      if (g_pending[j] == requests[i]) {
        w->index[w->count] = i;
        w->handle[w->count] = requests[i];
        ++w->count;
        break;
      }
    }
  }
  pthread_mutex_unlock(&g_pending_mu);
}

/* After the call: a watched request now MPI_REQUEST_NULL has completed. */
static void Settle(const MPI_Request* requests, const struct Watched* w) {
  if (w->count == 0) return;
  uint64_t done = 0;
  pthread_mutex_lock(&g_pending_mu);
  for (int k = 0; k < w->count; ++k) {
    if (requests[w->index[k]] != MPI_REQUEST_NULL) continue;
    for (int j = 0; j < g_pending_count; ++j) {
      if (g_pending[j] == w->handle[k]) {
        g_pending[j] = g_pending[g_pending_count - 1];
        __atomic_store_n(&g_pending_count, g_pending_count - 1, __ATOMIC_RELAXED);
        ++done;
        break;
      }
    }
  }
  pthread_mutex_unlock(&g_pending_mu);
  if (done > 0) Completed(done);
}

#define RM_BLOCKING(call) \
  do {                    \
    Entered();            \
    int rc_ = (call);     \
    Completed(1);         \
    return rc_;           \
  } while (0)

#define RM_NONBLOCKING(call, request) \
  do {                                \
    Entered();                        \
    int rc_ = (call);                 \
    Track(rc_, (request));            \
    return rc_;                       \
  } while (0)

RM_EXPORT int MPI_Allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  RM_BLOCKING(PMPI_Allreduce(s, r, n, t, op, c));
}
RM_EXPORT int MPI_Reduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root,
                         MPI_Comm c) {
  RM_BLOCKING(PMPI_Reduce(s, r, n, t, op, root, c));
}
RM_EXPORT int MPI_Bcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c) {
  RM_BLOCKING(PMPI_Bcast(b, n, t, root, c));
}
RM_EXPORT int MPI_Barrier(MPI_Comm c) { RM_BLOCKING(PMPI_Barrier(c)); }
RM_EXPORT int MPI_Allgather(const void* s, int sn, MPI_Datatype st, void* r, int rn,
                            MPI_Datatype rt, MPI_Comm c) {
  RM_BLOCKING(PMPI_Allgather(s, sn, st, r, rn, rt, c));
}
RM_EXPORT int MPI_Allgatherv(const void* s, int sn, MPI_Datatype st, void* r, const int rn[],
                             const int d[], MPI_Datatype rt, MPI_Comm c) {
  RM_BLOCKING(PMPI_Allgatherv(s, sn, st, r, rn, d, rt, c));
}
RM_EXPORT int MPI_Alltoall(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt,
                           MPI_Comm c) {
  RM_BLOCKING(PMPI_Alltoall(s, sn, st, r, rn, rt, c));
}
RM_EXPORT int MPI_Alltoallv(const void* s, const int sn[], const int sd[], MPI_Datatype st, void* r,
                            const int rn[], const int rd[], MPI_Datatype rt, MPI_Comm c) {
  RM_BLOCKING(PMPI_Alltoallv(s, sn, sd, st, r, rn, rd, rt, c));
}
RM_EXPORT int MPI_Reduce_scatter(const void* s, void* r, const int rn[], MPI_Datatype t, MPI_Op op,
                                 MPI_Comm c) {
  RM_BLOCKING(PMPI_Reduce_scatter(s, r, rn, t, op, c));
}
RM_EXPORT int MPI_Reduce_scatter_block(const void* s, void* r, int rn, MPI_Datatype t, MPI_Op op,
                                       MPI_Comm c) {
  RM_BLOCKING(PMPI_Reduce_scatter_block(s, r, rn, t, op, c));
}
RM_EXPORT int MPI_Gather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt,
                         int root, MPI_Comm c) {
  RM_BLOCKING(PMPI_Gather(s, sn, st, r, rn, rt, root, c));
}
RM_EXPORT int MPI_Gatherv(const void* s, int sn, MPI_Datatype st, void* r, const int rn[],
                          const int d[], MPI_Datatype rt, int root, MPI_Comm c) {
  RM_BLOCKING(PMPI_Gatherv(s, sn, st, r, rn, d, rt, root, c));
}
RM_EXPORT int MPI_Scatter(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt,
                          int root, MPI_Comm c) {
  RM_BLOCKING(PMPI_Scatter(s, sn, st, r, rn, rt, root, c));
}
RM_EXPORT int MPI_Scatterv(const void* s, const int sn[], const int d[], MPI_Datatype st, void* r,
                           int rn, MPI_Datatype rt, int root, MPI_Comm c) {
  RM_BLOCKING(PMPI_Scatterv(s, sn, d, st, r, rn, rt, root, c));
}
RM_EXPORT int MPI_Scan(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  RM_BLOCKING(PMPI_Scan(s, r, n, t, op, c));
}
RM_EXPORT int MPI_Exscan(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  RM_BLOCKING(PMPI_Exscan(s, r, n, t, op, c));
}

RM_EXPORT int MPI_Iallreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c,
                             MPI_Request* q) {
  RM_NONBLOCKING(PMPI_Iallreduce(s, r, n, t, op, c, q), q);
}
RM_EXPORT int MPI_Ireduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root,
                          MPI_Comm c, MPI_Request* q) {
  RM_NONBLOCKING(PMPI_Ireduce(s, r, n, t, op, root, c, q), q);
}
RM_EXPORT int MPI_Ibcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request* q) {
  RM_NONBLOCKING(PMPI_Ibcast(b, n, t, root, c, q), q);
}
RM_EXPORT int MPI_Ibarrier(MPI_Comm c, MPI_Request* q) { RM_NONBLOCKING(PMPI_Ibarrier(c, q), q); }
RM_EXPORT int MPI_Iallgather(const void* s, int sn, MPI_Datatype st, void* r, int rn,
                             MPI_Datatype rt, MPI_Comm c, MPI_Request* q) {
  RM_NONBLOCKING(PMPI_Iallgather(s, sn, st, r, rn, rt, c, q), q);
}
RM_EXPORT int MPI_Iallgatherv(const void* s, int sn, MPI_Datatype st, void* r, const int rn[],
                              const int d[], MPI_Datatype rt, MPI_Comm c, MPI_Request* q) {
  RM_NONBLOCKING(PMPI_Iallgatherv(s, sn, st, r, rn, d, rt, c, q), q);
}
RM_EXPORT int MPI_Ialltoall(const void* s, int sn, MPI_Datatype st, void* r, int rn,
                            MPI_Datatype rt, MPI_Comm c, MPI_Request* q) {
  RM_NONBLOCKING(PMPI_Ialltoall(s, sn, st, r, rn, rt, c, q), q);
}
RM_EXPORT int MPI_Ialltoallv(const void* s, const int sn[], const int sd[], MPI_Datatype st,
                             void* r, const int rn[], const int rd[], MPI_Datatype rt, MPI_Comm c,
                             MPI_Request* q) {
  RM_NONBLOCKING(PMPI_Ialltoallv(s, sn, sd, st, r, rn, rd, rt, c, q), q);
}
RM_EXPORT int MPI_Ireduce_scatter(const void* s, void* r, const int rn[], MPI_Datatype t, MPI_Op op,
                                  MPI_Comm c, MPI_Request* q) {
  RM_NONBLOCKING(PMPI_Ireduce_scatter(s, r, rn, t, op, c, q), q);
}
RM_EXPORT int MPI_Ireduce_scatter_block(const void* s, void* r, int rn, MPI_Datatype t, MPI_Op op,
                                        MPI_Comm c, MPI_Request* q) {
  RM_NONBLOCKING(PMPI_Ireduce_scatter_block(s, r, rn, t, op, c, q), q);
}
RM_EXPORT int MPI_Igather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt,
                          int root, MPI_Comm c, MPI_Request* q) {
  RM_NONBLOCKING(PMPI_Igather(s, sn, st, r, rn, rt, root, c, q), q);
}
RM_EXPORT int MPI_Igatherv(const void* s, int sn, MPI_Datatype st, void* r, const int rn[],
                           const int d[], MPI_Datatype rt, int root, MPI_Comm c, MPI_Request* q) {
  RM_NONBLOCKING(PMPI_Igatherv(s, sn, st, r, rn, d, rt, root, c, q), q);
}
RM_EXPORT int MPI_Iscatter(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt,
                           int root, MPI_Comm c, MPI_Request* q) {
  RM_NONBLOCKING(PMPI_Iscatter(s, sn, st, r, rn, rt, root, c, q), q);
}
RM_EXPORT int MPI_Iscatterv(const void* s, const int sn[], const int d[], MPI_Datatype st, void* r,
                            int rn, MPI_Datatype rt, int root, MPI_Comm c, MPI_Request* q) {
  RM_NONBLOCKING(PMPI_Iscatterv(s, sn, d, st, r, rn, rt, root, c, q), q);
}

RM_EXPORT int MPI_Wait(MPI_Request* q, MPI_Status* st) {
  struct Watched w;
  Watch(1, q, &w);
  int rc = PMPI_Wait(q, st);
  Settle(q, &w);
  return rc;
}
RM_EXPORT int MPI_Test(MPI_Request* q, int* flag, MPI_Status* st) {
  struct Watched w;
  Watch(1, q, &w);
  int rc = PMPI_Test(q, flag, st);
  Settle(q, &w);
  return rc;
}
RM_EXPORT int MPI_Waitall(int n, MPI_Request q[], MPI_Status st[]) {
  struct Watched w;
  Watch(n, q, &w);
  int rc = PMPI_Waitall(n, q, st);
  Settle(q, &w);
  return rc;
}
RM_EXPORT int MPI_Testall(int n, MPI_Request q[], int* flag, MPI_Status st[]) {
  struct Watched w;
  Watch(n, q, &w);
  int rc = PMPI_Testall(n, q, flag, st);
  Settle(q, &w);
  return rc;
}
RM_EXPORT int MPI_Waitany(int n, MPI_Request q[], int* index, MPI_Status* st) {
  struct Watched w;
  Watch(n, q, &w);
  int rc = PMPI_Waitany(n, q, index, st);
  Settle(q, &w);
  return rc;
}
RM_EXPORT int MPI_Testany(int n, MPI_Request q[], int* index, int* flag, MPI_Status* st) {
  struct Watched w;
  Watch(n, q, &w);
  int rc = PMPI_Testany(n, q, index, flag, st);
  Settle(q, &w);
  return rc;
}
RM_EXPORT int MPI_Waitsome(int n, MPI_Request q[], int* out, int idx[], MPI_Status st[]) {
  struct Watched w;
  Watch(n, q, &w);
  int rc = PMPI_Waitsome(n, q, out, idx, st);
  Settle(q, &w);
  return rc;
}
RM_EXPORT int MPI_Testsome(int n, MPI_Request q[], int* out, int idx[], MPI_Status st[]) {
  struct Watched w;
  Watch(n, q, &w);
  int rc = PMPI_Testsome(n, q, out, idx, st);
  Settle(q, &w);
  return rc;
}
