/* Runs under LD_PRELOAD=libringmaster_nccl.so, linked to fake_nccl_cuda (tests.cmake): NCCL
 * collectives are counted entered when called and completed only once the (fake) GPU has
 * passed the event recorded after them; a group completes with its one event.
 *   nccl_counter_check CHANNEL_FILE   exit 0 when every count is as expected */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "rank/rank_channel.h"

extern int fake_gpu_done;
extern int fake_nccl_calls;
int ncclAllReduce(const void*, void*, size_t, int, int, void*, void*);
int ncclBroadcast(const void*, void*, size_t, int, int, void*, void*);
int ncclGroupStart(void);
int ncclGroupEnd(void);

static struct rm_rank_channel* ch;

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static int expect(uint64_t entered, uint64_t completed, const char* when) {
  const uint64_t e = __atomic_load_n(&ch->collectives_entered, __ATOMIC_RELAXED);
  const uint64_t c = __atomic_load_n(&ch->collectives_completed, __ATOMIC_RELAXED);
  if (e == entered && c == completed) return 1;
  fprintf(stderr, "%s: entered %llu completed %llu, expected %llu and %llu\n", when,
          (unsigned long long)e, (unsigned long long)c, (unsigned long long)entered,
          (unsigned long long)completed);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: nccl_counter_check CHANNEL_FILE\n");
    return 2;
  }
  int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ftruncate(fd, RM_RANK_CHANNEL_SIZE) != 0) return 2;
  ch = mmap(NULL, RM_RANK_CHANNEL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (ch == MAP_FAILED) return 2;
  __atomic_store_n(&ch->magic, RM_RANK_CHANNEL_MAGIC, __ATOMIC_RELEASE);
  setenv(RM_RANK_CHANNEL_ENV, argv[1], 1);

  int ok = 1;
  for (int i = 0; i < 3; ++i) ok &= ncclAllReduce(NULL, NULL, 4, 7, 0, NULL, NULL) == 0;
  sleep_ms(100);  /* the poller looks every 20 ms: nothing may complete while the GPU is busy */
  ok &= expect(3, 0, "3 allreduces on a busy GPU");
  ok &= ncclGroupStart() == 0;
  ok &= ncclAllReduce(NULL, NULL, 4, 7, 0, NULL, NULL) == 0;
  ok &= ncclBroadcast(NULL, NULL, 4, 7, 0, NULL, NULL) == 0;
  ok &= expect(5, 0, "inside a group");
  ok &= ncclGroupEnd() == 0;
  sleep_ms(100);
  ok &= expect(5, 0, "a group on a busy GPU");
  __atomic_store_n(&fake_gpu_done, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < 200 && __atomic_load_n(&ch->collectives_completed, __ATOMIC_RELAXED) < 5; ++i) {
    sleep_ms(10);
  }
  ok &= expect(5, 5, "once the GPU passed every event");
  if (fake_nccl_calls != 5) {
    fprintf(stderr, "the real (fake) NCCL got %d calls, expected 5\n", fake_nccl_calls);
    ok = 0;
  }
  unlink(argv[1]);
  if (ok) printf("NCCL collectives counted: 5 entered, completed with their events\n");
  return ok ? 0 : 1;
}
