/* The rank channel: a small shared file through which a rank's processes tell its wrapper
 * (ringmaster-rank) what the rank is doing, without a system call per event.
 *
 * The wrapper creates the file (one page), maps it and puts its path in the workload's
 * environment as RINGMASTER_RANK_CHANNEL. Writers map it too and update its counters with
 * relaxed atomic adds and stores:
 *   - libringmaster_pmpi.so (preloaded into every rank) counts MPI collectives entered and
 *     completed, and keeps `mpi_state`: which blocking MPI call the rank is inside, if any;
 *   - ringmaster-progress and the trainer report the step (and images/sec).
 * The wrapper reads the counters every 50 ms and reports changes to its worker. Readers may
 * see a counter a moment late; none is ever lost, since each is cumulative.
 *
 * Plain C (the PMPI library is C) and header-only; usable from C++. Thread-safe: any number of
 * processes and threads may write at once. */
#ifndef RINGMASTER_LIBS_RANK_RANK_CHANNEL_H_
#define RINGMASTER_LIBS_RANK_RANK_CHANNEL_H_

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RM_RANK_CHANNEL_ENV "RINGMASTER_RANK_CHANNEL"
#define RM_RANK_CHANNEL_MAGIC 0x31304e4148434d52ULL /* "RMCHAN01", little-endian */
#define RM_RANK_CHANNEL_SIZE 4096

struct rm_rank_channel {
  uint64_t magic;
  uint64_t reserved[7];
  /* Written by the PMPI library, on a cache line of their own. */
  uint64_t collectives_entered;
  uint64_t collectives_completed;
  uint64_t pad1[6];
  /* Written by progress reporters. images_per_second holds a double's bits; valid when
   * has_images_per_second is 1. progress_reports is bumped last (release). */
  uint64_t progress_step;
  uint64_t images_per_second_bits;
  uint64_t has_images_per_second;
  uint64_t progress_reports;
  uint64_t pad2[4];
  /* Written by the PMPI library at every blocking MPI call (rm_mpi_enter), on a line of its
   * own: the counters above change far less often. */
  uint64_t mpi_state;
  uint64_t pad3[7];
};

struct rm_rank_snapshot {
  uint64_t collectives_entered;
  uint64_t collectives_completed;
  uint64_t progress_step;
  uint64_t progress_reports;
  int has_images_per_second;
  double images_per_second;
  uint64_t mpi_state;
};

/* The blocking MPI calls libringmaster_pmpi.so tracks, by the number it stores in mpi_state. The
 * numbers are part of the channel's format: append, never renumber (at most 127). */
/* clang-format off */
#define RM_MPI_CALLS(X)                                                                          \
  X(1, MPI_Send) X(2, MPI_Recv) X(3, MPI_Sendrecv) X(4, MPI_Sendrecv_replace) X(5, MPI_Ssend)   \
  X(6, MPI_Bsend) X(7, MPI_Rsend) X(8, MPI_Probe) X(9, MPI_Mprobe) X(10, MPI_Mrecv)             \
  X(11, MPI_Wait) X(12, MPI_Waitall) X(13, MPI_Waitany) X(14, MPI_Waitsome)                     \
  X(15, MPI_Allreduce) X(16, MPI_Reduce) X(17, MPI_Bcast) X(18, MPI_Barrier)                    \
  X(19, MPI_Allgather) X(20, MPI_Allgatherv) X(21, MPI_Alltoall) X(22, MPI_Alltoallv)           \
  X(23, MPI_Reduce_scatter) X(24, MPI_Reduce_scatter_block) X(25, MPI_Gather)                   \
  X(26, MPI_Gatherv) X(27, MPI_Scatter) X(28, MPI_Scatterv) X(29, MPI_Scan) X(30, MPI_Exscan)
/* clang-format on */

#define RM_MPI_CALL_ENUM(n, name) RM_CALL_##name = n,
enum rm_mpi_call { RM_CALL_NONE = 0, RM_MPI_CALLS(RM_MPI_CALL_ENUM) };
#undef RM_MPI_CALL_ENUM

/* "MPI_Recv" for RM_CALL_MPI_Recv; "MPI call N" for a number this build does not know. */
static inline const char* rm_mpi_call_name(unsigned call, char* buffer, size_t size) {
  switch (call) {
#define RM_MPI_CALL_CASE(n, name) \
  case n:                         \
    return #name;
    RM_MPI_CALLS(RM_MPI_CALL_CASE)
#undef RM_MPI_CALL_CASE
    default:
      break;
  }
  snprintf(buffer, size, "MPI call %u", call);
  return buffer;
}

/* Maps the channel at `path` (RINGMASTER_RANK_CHANNEL when NULL). NULL when there is none or it
 * is not a channel. The mapping lives until the process ends. */
static inline struct rm_rank_channel* rm_rank_channel_open(const char* path) {
  if (path == NULL) path = getenv(RM_RANK_CHANNEL_ENV);
  if (path == NULL || path[0] == '\0') return NULL;
  /* Never through a symlink, and only a regular file big enough: a shorter file would map,
   * then fault (SIGBUS) at the first read past its end. */
  int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return NULL;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)RM_RANK_CHANNEL_SIZE) {
    close(fd);
    return NULL;
  }
  void* p = mmap(NULL, RM_RANK_CHANNEL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return NULL;
  struct rm_rank_channel* ch = (struct rm_rank_channel*)p;
  if (__atomic_load_n(&ch->magic, __ATOMIC_ACQUIRE) != RM_RANK_CHANNEL_MAGIC) {
    munmap(p, RM_RANK_CHANNEL_SIZE);
    return NULL;
  }
  return ch;
}

static inline void rm_rank_channel_report_progress(struct rm_rank_channel* ch, uint64_t step,
                                                   int has_images_per_second,
                                                   double images_per_second) {
  if (ch == NULL) return;
  __atomic_store_n(&ch->progress_step, step, __ATOMIC_RELAXED);
  if (has_images_per_second) {
    uint64_t bits;
    memcpy(&bits, &images_per_second, sizeof(bits));
    __atomic_store_n(&ch->images_per_second_bits, bits, __ATOMIC_RELAXED);
    __atomic_store_n(&ch->has_images_per_second, 1, __ATOMIC_RELAXED);
  }
  __atomic_fetch_add(&ch->progress_reports, 1, __ATOMIC_RELEASE);
}

/* Where the rank's program is with respect to MPI. The PMPI library stores it on entry to and
 * exit from every blocking MPI call it defines (point-to-point, waits, probes, collectives),
 * one relaxed store each and no clock read: the wrapper, which polls the word, times how long
 * it stays the same. Bit 0: inside the call; bits 1-7: the call (rm_mpi_call); bits 8-63: how
 * many such calls the rank entered, which makes every entry a new value. With several threads
 * in MPI at once, the last one to enter or leave wins. */
static inline uint64_t rm_mpi_state_inside(uint64_t state) { return state & 1; }
static inline unsigned rm_mpi_state_call(uint64_t state) { return (unsigned)(state >> 1) & 0x7f; }
static inline uint64_t rm_mpi_state_calls(uint64_t state) { return state >> 8; }

/* On entry: returns the value rm_mpi_leave needs. */
static inline uint64_t rm_mpi_enter(struct rm_rank_channel* ch, unsigned call) {
  const uint64_t calls = rm_mpi_state_calls(__atomic_load_n(&ch->mpi_state, __ATOMIC_RELAXED));
  const uint64_t state = ((calls + 1) << 8) | ((uint64_t)(call & 0x7f) << 1) | 1;
  __atomic_store_n(&ch->mpi_state, state, __ATOMIC_RELAXED);
  return state;
}
static inline void rm_mpi_leave(struct rm_rank_channel* ch, uint64_t entered) {
  __atomic_store_n(&ch->mpi_state, entered & ~(uint64_t)1, __ATOMIC_RELAXED);
}

static inline uint64_t rm_rank_channel_mpi_state(const struct rm_rank_channel* ch) {
  return __atomic_load_n(&ch->mpi_state, __ATOMIC_RELAXED);
}

static inline struct rm_rank_snapshot rm_rank_channel_read(const struct rm_rank_channel* ch) {
  struct rm_rank_snapshot s;
  s.progress_reports = __atomic_load_n(&ch->progress_reports, __ATOMIC_ACQUIRE);
  s.progress_step = __atomic_load_n(&ch->progress_step, __ATOMIC_RELAXED);
  s.has_images_per_second = __atomic_load_n(&ch->has_images_per_second, __ATOMIC_RELAXED) != 0;
  uint64_t bits = __atomic_load_n(&ch->images_per_second_bits, __ATOMIC_RELAXED);
  memcpy(&s.images_per_second, &bits, sizeof(bits));
  /* Completed before entered (an acquire load, so the second read cannot move ahead of it):
     a collective that starts and ends between the two reads then cannot make completed
     exceed entered, which the agent would refuse. */
  s.collectives_completed = __atomic_load_n(&ch->collectives_completed, __ATOMIC_ACQUIRE);
  s.collectives_entered = __atomic_load_n(&ch->collectives_entered, __ATOMIC_RELAXED);
  s.mpi_state = rm_rank_channel_mpi_state(ch);
  return s;
}

#ifdef __cplusplus
}
#endif

#endif /* RINGMASTER_LIBS_RANK_RANK_CHANNEL_H_ */
