/* The rank channel: a small shared file through which a rank's processes tell its wrapper
 * (ringmaster-rank) what the rank is doing, without a system call per event.
 *
 * The wrapper creates the file (one page), maps it and puts its path in the workload's
 * environment as RINGMASTER_RANK_CHANNEL. Writers map it too and update its counters with
 * relaxed atomic adds and stores:
 *   - libringmaster_pmpi.so (preloaded into every rank) counts MPI collectives entered and
 *     completed;
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
};

struct rm_rank_snapshot {
  uint64_t collectives_entered;
  uint64_t collectives_completed;
  uint64_t progress_step;
  uint64_t progress_reports;
  int has_images_per_second;
  double images_per_second;
};

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
  return s;
}

#ifdef __cplusplus
}
#endif

#endif /* RINGMASTER_LIBS_RANK_RANK_CHANNEL_H_ */
