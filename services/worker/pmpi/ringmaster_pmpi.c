/* libringmaster_pmpi.so: counts the MPI collectives a rank enters and completes, and shows
 * which blocking MPI call (point-to-point, wait, probe, collective) the rank is inside, if any,
 * for hang detection (docs/health.md). The rank wrapper preloads it (LD_PRELOAD) into every rank.
 *
 * Each MPI_<collective> defined here bumps `collectives_entered`, calls PMPI_<collective> and
 * bumps `collectives_completed` when it returns; a nonblocking I<collective> is entered at its
 * call and completed when a Wait/Test call sees its request finish (set to MPI_REQUEST_NULL).
 * The counters live in the rank channel (rank_channel.h): one relaxed atomic add each, no
 * system call. Every blocking call defined here also stores the call's number in the channel's
 * mpi_state on entry and clears its inside bit on exit (rm_mpi_enter/rm_mpi_leave: a load and
 * two plain stores, no clock read, no atomic read-modify-write), so that a hang verdict can tell
 * the rank that is not in MPI from those that wait inside it. Nonblocking calls (Isend, Test,
 * Iprobe) are not shown: a rank that polls MPI_Test shows as outside MPI between its polls.
 *
 * Harmless elsewhere: every reference to Open MPI's symbols is weak, so the library loads into
 * programs without MPI (nothing here is ever called there), and a statically linked program
 * never sees it. Without a channel (RINGMASTER_RANK_CHANNEL unset) it counts into a private
 * page. Built against Debian's Open MPI 4.1 (its mpi.h); the ABI is Open MPI's.
 *
 * It also runs the pre-run allreduce check inside the job's own MPI_Init when the worker asks
 * for it (RINGMASTER_PRECHECK_RESULT set; docs/health-check.md): the same allreduces as
 * ringmaster-check, on a duplicate of MPI_COMM_WORLD, before MPI_Init returns to the program.
 * Rank 0 writes the result file the launcher reads. */
#include <dlfcn.h>
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rank/check_result.h"
#include "rank/rank_channel.h"
#include "rank/rank_env.h"

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
#pragma weak PMPI_Send
#pragma weak PMPI_Ssend
#pragma weak PMPI_Bsend
#pragma weak PMPI_Rsend
#pragma weak PMPI_Recv
#pragma weak PMPI_Sendrecv
#pragma weak PMPI_Sendrecv_replace
#pragma weak PMPI_Probe
#pragma weak PMPI_Mprobe
#pragma weak PMPI_Mrecv
/* The in-session check's. Open MPI's predefined handles are addresses of these objects. */
#pragma weak PMPI_Comm_rank
#pragma weak PMPI_Comm_size
#pragma weak PMPI_Abort
#pragma weak ompi_mpi_comm_world
#pragma weak ompi_mpi_float
#pragma weak ompi_mpi_byte
#pragma weak ompi_mpi_int
#pragma weak ompi_mpi_op_sum

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

/* Remembers which of `requests` are tracked collectives, before a Wait/Test overwrites them.
 * Room for 64 on the stack; a call on more requests gets room for all of them on the heap
 * (a Waitall of 100 nonblocking collectives left 36 counted as never completed, and their
 * entries in the table for good, when there was room for 64 only). */
#define RM_WATCHED_INLINE 64
struct Watched {
  int count;
  int capacity;
  int* index;
  MPI_Request* handle;
  int inline_index[RM_WATCHED_INLINE];
  MPI_Request inline_handle[RM_WATCHED_INLINE];
};

static void Watch(int n, const MPI_Request* requests, struct Watched* w) {
  w->count = 0;
  w->capacity = RM_WATCHED_INLINE;
  w->index = w->inline_index;
  w->handle = w->inline_handle;
  if (__atomic_load_n(&g_pending_count, __ATOMIC_RELAXED) == 0 || requests == NULL) return;
  if (n > RM_WATCHED_INLINE) {
    int* index = malloc(sizeof(int) * (size_t)n);
    MPI_Request* handle = malloc(sizeof(MPI_Request) * (size_t)n);
    if (index != NULL && handle != NULL) {
      w->capacity = n;
      w->index = index;
      w->handle = handle;
    } else { /* out of memory: watch the first 64 as before */
      free(index);
      free(handle);
    }
  }
  pthread_mutex_lock(&g_pending_mu);
  for (int i = 0; i < n && w->count < w->capacity; ++i) {
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

static void Unwatch(struct Watched* w) {
  if (w->index != w->inline_index) free(w->index);
  if (w->handle != w->inline_handle) free(w->handle);
}

/* After the call: a watched request now MPI_REQUEST_NULL has completed. */
static void Settle(const MPI_Request* requests, struct Watched* w) {
  if (w->count == 0) {
    Unwatch(w);
    return;
  }
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
  Unwatch(w);
  if (done > 0) Completed(done);
}

/* A blocking collective: counted, and the rank shown inside it while it runs. */
#define RM_BLOCKING(id, call)                                             \
  do {                                                                    \
    struct rm_rank_channel* ch_ = Channel();                              \
    const uint64_t state_ = rm_mpi_enter(ch_, (id));                      \
    __atomic_fetch_add(&ch_->collectives_entered, 1, __ATOMIC_RELAXED);   \
    int rc_ = (call);                                                     \
    __atomic_fetch_add(&ch_->collectives_completed, 1, __ATOMIC_RELAXED); \
    rm_mpi_leave(ch_, state_);                                            \
    return rc_;                                                           \
  } while (0)

/* Any other blocking call (point-to-point, a wait, a probe): only shown, not counted. */
#define RM_INSIDE(id, call)                          \
  do {                                               \
    struct rm_rank_channel* ch_ = Channel();         \
    const uint64_t state_ = rm_mpi_enter(ch_, (id)); \
    int rc_ = (call);                                \
    rm_mpi_leave(ch_, state_);                       \
    return rc_;                                      \
  } while (0)

#define RM_NONBLOCKING(call, request) \
  do {                                \
    Entered();                        \
    int rc_ = (call);                 \
    Track(rc_, (request));            \
    return rc_;                       \
  } while (0)

RM_EXPORT int MPI_Allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  RM_BLOCKING(RM_CALL_MPI_Allreduce, PMPI_Allreduce(s, r, n, t, op, c));
}
RM_EXPORT int MPI_Reduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root,
                         MPI_Comm c) {
  RM_BLOCKING(RM_CALL_MPI_Reduce, PMPI_Reduce(s, r, n, t, op, root, c));
}
RM_EXPORT int MPI_Bcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c) {
  RM_BLOCKING(RM_CALL_MPI_Bcast, PMPI_Bcast(b, n, t, root, c));
}
RM_EXPORT int MPI_Barrier(MPI_Comm c) { RM_BLOCKING(RM_CALL_MPI_Barrier, PMPI_Barrier(c)); }
RM_EXPORT int MPI_Allgather(const void* s, int sn, MPI_Datatype st, void* r, int rn,
                            MPI_Datatype rt, MPI_Comm c) {
  RM_BLOCKING(RM_CALL_MPI_Allgather, PMPI_Allgather(s, sn, st, r, rn, rt, c));
}
RM_EXPORT int MPI_Allgatherv(const void* s, int sn, MPI_Datatype st, void* r, const int rn[],
                             const int d[], MPI_Datatype rt, MPI_Comm c) {
  RM_BLOCKING(RM_CALL_MPI_Allgatherv, PMPI_Allgatherv(s, sn, st, r, rn, d, rt, c));
}
RM_EXPORT int MPI_Alltoall(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt,
                           MPI_Comm c) {
  RM_BLOCKING(RM_CALL_MPI_Alltoall, PMPI_Alltoall(s, sn, st, r, rn, rt, c));
}
RM_EXPORT int MPI_Alltoallv(const void* s, const int sn[], const int sd[], MPI_Datatype st, void* r,
                            const int rn[], const int rd[], MPI_Datatype rt, MPI_Comm c) {
  RM_BLOCKING(RM_CALL_MPI_Alltoallv, PMPI_Alltoallv(s, sn, sd, st, r, rn, rd, rt, c));
}
RM_EXPORT int MPI_Reduce_scatter(const void* s, void* r, const int rn[], MPI_Datatype t, MPI_Op op,
                                 MPI_Comm c) {
  RM_BLOCKING(RM_CALL_MPI_Reduce_scatter, PMPI_Reduce_scatter(s, r, rn, t, op, c));
}
RM_EXPORT int MPI_Reduce_scatter_block(const void* s, void* r, int rn, MPI_Datatype t, MPI_Op op,
                                       MPI_Comm c) {
  RM_BLOCKING(RM_CALL_MPI_Reduce_scatter_block, PMPI_Reduce_scatter_block(s, r, rn, t, op, c));
}
RM_EXPORT int MPI_Gather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt,
                         int root, MPI_Comm c) {
  RM_BLOCKING(RM_CALL_MPI_Gather, PMPI_Gather(s, sn, st, r, rn, rt, root, c));
}
RM_EXPORT int MPI_Gatherv(const void* s, int sn, MPI_Datatype st, void* r, const int rn[],
                          const int d[], MPI_Datatype rt, int root, MPI_Comm c) {
  RM_BLOCKING(RM_CALL_MPI_Gatherv, PMPI_Gatherv(s, sn, st, r, rn, d, rt, root, c));
}
RM_EXPORT int MPI_Scatter(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt,
                          int root, MPI_Comm c) {
  RM_BLOCKING(RM_CALL_MPI_Scatter, PMPI_Scatter(s, sn, st, r, rn, rt, root, c));
}
RM_EXPORT int MPI_Scatterv(const void* s, const int sn[], const int d[], MPI_Datatype st, void* r,
                           int rn, MPI_Datatype rt, int root, MPI_Comm c) {
  RM_BLOCKING(RM_CALL_MPI_Scatterv, PMPI_Scatterv(s, sn, d, st, r, rn, rt, root, c));
}
RM_EXPORT int MPI_Scan(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  RM_BLOCKING(RM_CALL_MPI_Scan, PMPI_Scan(s, r, n, t, op, c));
}
RM_EXPORT int MPI_Exscan(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  RM_BLOCKING(RM_CALL_MPI_Exscan, PMPI_Exscan(s, r, n, t, op, c));
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

/* Blocking point-to-point calls and probes: the rank is shown inside them while they run (a rank
 * waiting on a peer that stopped calling MPI waits here, e.g. in mpi4py's object allreduce). */
RM_EXPORT int MPI_Send(const void* b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
  RM_INSIDE(RM_CALL_MPI_Send, PMPI_Send(b, n, t, dest, tag, c));
}
RM_EXPORT int MPI_Ssend(const void* b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
  RM_INSIDE(RM_CALL_MPI_Ssend, PMPI_Ssend(b, n, t, dest, tag, c));
}
RM_EXPORT int MPI_Bsend(const void* b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
  RM_INSIDE(RM_CALL_MPI_Bsend, PMPI_Bsend(b, n, t, dest, tag, c));
}
RM_EXPORT int MPI_Rsend(const void* b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm c) {
  RM_INSIDE(RM_CALL_MPI_Rsend, PMPI_Rsend(b, n, t, dest, tag, c));
}
RM_EXPORT int MPI_Recv(void* b, int n, MPI_Datatype t, int source, int tag, MPI_Comm c,
                       MPI_Status* st) {
  RM_INSIDE(RM_CALL_MPI_Recv, PMPI_Recv(b, n, t, source, tag, c, st));
}
RM_EXPORT int MPI_Sendrecv(const void* s, int sn, MPI_Datatype st, int dest, int stag, void* r,
                           int rn, MPI_Datatype rt, int source, int rtag, MPI_Comm c,
                           MPI_Status* status) {
  RM_INSIDE(RM_CALL_MPI_Sendrecv,
            PMPI_Sendrecv(s, sn, st, dest, stag, r, rn, rt, source, rtag, c, status));
}
RM_EXPORT int MPI_Sendrecv_replace(void* b, int n, MPI_Datatype t, int dest, int stag, int source,
                                   int rtag, MPI_Comm c, MPI_Status* status) {
  RM_INSIDE(RM_CALL_MPI_Sendrecv_replace,
            PMPI_Sendrecv_replace(b, n, t, dest, stag, source, rtag, c, status));
}
RM_EXPORT int MPI_Probe(int source, int tag, MPI_Comm c, MPI_Status* st) {
  RM_INSIDE(RM_CALL_MPI_Probe, PMPI_Probe(source, tag, c, st));
}
RM_EXPORT int MPI_Mprobe(int source, int tag, MPI_Comm c, MPI_Message* m, MPI_Status* st) {
  RM_INSIDE(RM_CALL_MPI_Mprobe, PMPI_Mprobe(source, tag, c, m, st));
}
RM_EXPORT int MPI_Mrecv(void* b, int n, MPI_Datatype t, MPI_Message* m, MPI_Status* st) {
  RM_INSIDE(RM_CALL_MPI_Mrecv, PMPI_Mrecv(b, n, t, m, st));
}

RM_EXPORT int MPI_Wait(MPI_Request* q, MPI_Status* st) {
  struct Watched w;
  Watch(1, q, &w);
  struct rm_rank_channel* ch = Channel();
  const uint64_t state = rm_mpi_enter(ch, RM_CALL_MPI_Wait);
  int rc = PMPI_Wait(q, st);
  rm_mpi_leave(ch, state);
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
  struct rm_rank_channel* ch = Channel();
  const uint64_t state = rm_mpi_enter(ch, RM_CALL_MPI_Waitall);
  int rc = PMPI_Waitall(n, q, st);
  rm_mpi_leave(ch, state);
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
  struct rm_rank_channel* ch = Channel();
  const uint64_t state = rm_mpi_enter(ch, RM_CALL_MPI_Waitany);
  int rc = PMPI_Waitany(n, q, index, st);
  rm_mpi_leave(ch, state);
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
  struct rm_rank_channel* ch = Channel();
  const uint64_t state = rm_mpi_enter(ch, RM_CALL_MPI_Waitsome);
  int rc = PMPI_Waitsome(n, q, out, idx, st);
  rm_mpi_leave(ch, state);
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

/* ---- The pre-run check inside MPI_Init ---------------------------------------------------
 * Mirrors ringmaster-check (trainer/check_main.cc), whose result format it writes: in-place
 * allreduces of 1 MiB of floats, 2 to warm up (the first also connects the ranks), then as
 * many timed ones as fit in RM_CHECK_BUDGET_S by the second warm-up's pace (rank 0 decides, 2
 * to 20, and broadcasts it), each rank timing its wait inside them (RINGMASTER_CHECK_DELAY_MS,
 * from a worker started with --check-delay-ms, sleeps before each: a slow host on purpose).
 * The last timed allreduce starts from the pattern again and every rank checks its sum. Rank 0
 * gathers each rank's wait, wrong count and worker id in one gather and writes the result by a
 * rename. busbw is that of the fastest timed allreduce, as ringmaster-check's: where ranks
 * share cores, a rank descheduled for part of the check slows some of the allreduces (on 2
 * cores they took 0.22 or 0.55 ms, mixed within one check), while a slow host or link slows
 * every one. elapsed_seconds is the whole check, which is what it adds to the program's
 * MPI_Init: the budget keeps it a small share of a start on a slow network (20 allreduces took
 * 50 ms over loopback TCP on 2 cores), and a fast one still gets 20; 5 ms (10 before the
 * second warm-up) keeps the check's time in MPI_Init about what it was. It runs on
 * MPI_COMM_WORLD itself: inside MPI_Init the program has no operation in flight to mix with,
 * and a duplicate costs a context-id agreement (collectives of its own). Only PMPI_ calls:
 * none of it is counted as the program's collectives. */

#define RM_CHECK_BYTES (1 << 20)
#define RM_CHECK_MIN_ITERS 2
#define RM_CHECK_MAX_ITERS 20
#define RM_CHECK_BUDGET_S 0.005
#define RM_WORKER_ID_BYTES 64

static double Seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Small integers: every sum is exact in a float. */
static float Pattern(int rank, size_t i) { return (float)(rank % 8 + (int)(i % 16)); }

static void CheckFailed(const char* what) {
  fprintf(stderr, "ringmaster pre-run check: %s\n", what);
  PMPI_Abort(MPI_COMM_WORLD, 1); /* the others wait in a collective this rank left */
}

/* What each rank sends rank 0 (as bytes: every rank runs the same build on the same kind of
 * host). */
struct RankResult {
  double wait;
  int wrong;
  char worker_id[RM_WORKER_ID_BYTES];
};

static void PreCheck(void) {
  const char* result = getenv(RM_ENV_PRECHECK_RESULT);
  if (result == NULL || result[0] == '\0') return;
  /* Data symbols bind when this library loads: a program that loads libmpi later (mpi4py)
   * leaves them unresolved. Every rank runs the same program, so all skip alike. */
  if (&ompi_mpi_comm_world == NULL || &ompi_mpi_float == NULL || &ompi_mpi_byte == NULL ||
      &ompi_mpi_int == NULL || &ompi_mpi_op_sum == NULL) {
    fprintf(stderr, "ringmaster pre-run check: libmpi was loaded after this library; skipped\n");
    return;
  }
  const double start = Seconds();
  int delay_ms = 0;
  if (getenv(RM_ENV_CHECK_DELAY_MS) != NULL) {
    delay_ms = atoi(getenv(RM_ENV_CHECK_DELAY_MS));
    if (delay_ms < 0 || delay_ms > 60000) delay_ms = 0;
  }
  MPI_Comm comm = MPI_COMM_WORLD;
  int rank = 0, size = 1;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  const size_t count = RM_CHECK_BYTES / sizeof(float);
  float* buffer = malloc(RM_CHECK_BYTES);
  if (buffer == NULL) {
    CheckFailed("out of memory");
    return;
  }
  for (size_t i = 0; i < count; ++i) buffer[i] = Pattern(rank, i);
  int rc = PMPI_Allreduce(MPI_IN_PLACE, buffer, (int)count, MPI_FLOAT, MPI_SUM, comm);
  const double warm_begun = Seconds();
  if (rc == MPI_SUCCESS) {
    rc = PMPI_Allreduce(MPI_IN_PLACE, buffer, (int)count, MPI_FLOAT, MPI_SUM, comm);
  }
  const double warm = Seconds() - warm_begun;
  /* The number of timed allreduces: rank 0's, by the second warm-up's pace (the first one's
   * includes connecting the ranks: on loopback it left as few as 2). */
  int iters = RM_CHECK_MAX_ITERS;
  if (warm > 0 && RM_CHECK_BUDGET_S / warm < RM_CHECK_MAX_ITERS) {
    iters = (int)(RM_CHECK_BUDGET_S / warm);
    if (iters < RM_CHECK_MIN_ITERS) iters = RM_CHECK_MIN_ITERS;
  }
  if (rc == MPI_SUCCESS) rc = PMPI_Bcast(&iters, 1, MPI_INT, 0, comm);
  double wait = 0;
  double fastest = 0;
  for (int i = 0; i < iters && rc == MPI_SUCCESS; ++i) {
    /* The last one sums the pattern, for the check of its result below. */
    if (i == iters - 1) {
      for (size_t k = 0; k < count; ++k) buffer[k] = Pattern(rank, k);
    }
    const double begun = Seconds(); /* the delay counts: a slow host slows the ring */
    if (delay_ms > 0) {
      struct timespec pause = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
      while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
      }
    }
    const double entered = Seconds();
    rc = PMPI_Allreduce(MPI_IN_PLACE, buffer, (int)count, MPI_FLOAT, MPI_SUM, comm);
    const double done = Seconds();
    wait += done - entered;
    if (i == 0 || done - begun < fastest) fastest = done - begun;
  }
  /* Correctness: the last allreduce's sum, checked by every rank. */
  struct RankResult mine;
  memset(&mine, 0, sizeof mine);
  mine.wait = wait;
  if (rc == MPI_SUCCESS) {
    float base = 0;
    for (int r = 0; r < size; ++r) base += (float)(r % 8);
    for (size_t i = 0; i < count; ++i) {
      mine.wrong += buffer[i] != base + (float)size * (float)(i % 16);
    }
  }
  free(buffer);
  const char* id = getenv(RM_ENV_WORKER_ID);
  if (id != NULL) strncpy(mine.worker_id, id, RM_WORKER_ID_BYTES - 1);
  struct RankResult* all = rank == 0 ? malloc(sizeof(struct RankResult) * (size_t)size) : NULL;
  if (rank == 0 && all == NULL) rc = MPI_ERR_NO_MEM;
  if (rc == MPI_SUCCESS) {
    rc = PMPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, 0, comm);
  }
  if (rc != MPI_SUCCESS) {
    free(all);
    CheckFailed("an allreduce or gather of the check failed");
    return;
  }
  if (rank == 0) {
    long long total_wrong = 0;
    for (int r = 0; r < size; ++r) total_wrong += all[r].wrong;
    const double algbw = (double)RM_CHECK_BYTES / (fastest > 1e-9 ? fastest : 1e-9) / 1e9;
    const double busbw = size > 1 ? algbw * 2.0 * (size - 1) / size : 0;
    char temp[4096];
    if (snprintf(temp, sizeof temp, "%s.tmp", result) < (int)sizeof temp) {
      FILE* out = fopen(temp, "w");
      if (out != NULL) {
        fprintf(out, RM_CHECK_RESULT_SUMMARY_FORMAT, "cpu", busbw, Seconds() - start, total_wrong);
        for (int r = 0; r < size; ++r) {
          const char* raw = all[r].worker_id;
          const size_t n = strnlen(raw, RM_WORKER_ID_BYTES);
          fprintf(out, RM_CHECK_RESULT_RANK_FORMAT, r,
                  n == 0 ? (int)strlen(RM_CHECK_NO_WORKER_ID) : (int)n,
                  n == 0 ? RM_CHECK_NO_WORKER_ID : raw, all[r].wait);
        }
        /* A failed write leaves no result: the launcher reports the check as not completed. */
        if (fclose(out) == 0) rename(temp, result);
      }
    }
    if (total_wrong > 0) {
      /* A ring that sums wrong must not train: the attempt fails, as a failed launch would. */
      free(all);
      CheckFailed("the check's allreduce summed wrong");
      return;
    }
  }
  free(all);
}

/* Libmpi's own function, looked up at the call: a program that dlopens libmpi with
 * RTLD_LOCAL (Python's mpi4py) has it outside the scope this library's references bind in. */
static void* RealFunction(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn != NULL) return fn;
  void* mpi = dlopen("libmpi.so.40", RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  return mpi != NULL ? dlsym(mpi, name) : NULL;
}

/* "MAJOR.MINOR" of an Open MPI version text ("Open MPI v4.1.4, package: ..." or "4.1.4") into
 * `out`; 0 when there is none. */
static int ReleaseSeries(const char* text, char* out, size_t size) {
  const char* v = strstr(text, "Open MPI v");
  v = v != NULL ? v + strlen("Open MPI v") : text;
  int major = 0, minor = 0;
  if (sscanf(v, "%d.%d", &major, &minor) != 2) return 0;
  snprintf(out, size, "%d.%d", major, minor);
  return 1;
}

/* A rank in a container runs the image's Open MPI under the workers' mpirun and orted: their
 * PMIx and launch protocols are kept within a release series only, and across series MPI_Init
 * fails or hangs with messages that do not say why. Said plainly instead, before trying. */
static void CheckReleaseSeries(void) {
  const char* host = getenv(RM_ENV_HOST_OPEN_MPI);
  if (host == NULL || host[0] == '\0') return;
  int (*version)(char*, int*) = (int (*)(char*, int*))RealFunction("MPI_Get_library_version");
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  int length = 0;
  if (version != NULL) version(text, &length);
  char want[32], have[32];
  if (!ReleaseSeries(host, want, sizeof(want))) return;
  if (strstr(text, "Open MPI") != NULL && ReleaseSeries(text, have, sizeof(have)) &&
      strcmp(want, have) == 0) {
    return;
  }
  char* newline = strchr(text, '\n');
  if (newline != NULL) *newline = '\0';
  fprintf(stderr,
          "ringmaster: this image's MPI (%s) cannot join the workers' mpirun (Open MPI %s): a "
          "rank in a container needs Open MPI %s.x in its image (docs/environments.md, \"MPI "
          "inside containers\"), or a program that does its own rendezvous from MASTER_ADDR "
          "and MASTER_PORT without MPI\n",
          text[0] != '\0' ? text : "unknown", host, want);
  fflush(stderr);
  _exit(1);
}

RM_EXPORT int MPI_Init(int* argc, char*** argv) {
  CheckReleaseSeries();
  int (*real)(int*, char***) = (int (*)(int*, char***))RealFunction("PMPI_Init");
  if (real == NULL) return MPI_ERR_OTHER;
  const int rc = real(argc, argv);
  if (rc == MPI_SUCCESS) PreCheck();
  return rc;
}

RM_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  CheckReleaseSeries();
  int (*real)(int*, char***, int, int*) =
      (int (*)(int*, char***, int, int*))RealFunction("PMPI_Init_thread");
  if (real == NULL) return MPI_ERR_OTHER;
  const int rc = real(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) PreCheck();
  return rc;
}
