/* libringmaster_nccl.so: counts the NCCL collectives a rank enters and completes, into the same
 * rank channel counters as libringmaster_pmpi.so's MPI collectives (docs/health.md). The rank
 * wrapper preloads both into every rank.
 *
 * An NCCL collective returns as soon as it is enqueued on its CUDA stream; it is done when the
 * stream gets past it. So each wrapper here bumps `collectives_entered`, calls the real
 * function, and records a CUDA event on the stream right after it; a thread of this library
 * polls the pending events (cuEventQuery, every 20 ms while any is pending) and bumps
 * `collectives_completed` for each one the GPU has passed. A collective stuck in its kernel
 * (a peer that never joined) therefore stays entered and not completed, as a blocking MPI
 * call does. Inside ncclGroupStart/ncclGroupEnd, NCCL launches nothing until the group ends:
 * the event is recorded at ncclGroupEnd, on the stream of the group's last collective, and
 * completes all of the group's collectives. Point-to-point calls (ncclSend, ncclRecv) are not
 * counted: ranks need not make the same ones, and the counts are compared across ranks.
 *
 * No CUDA or NCCL headers or libraries at build time: the few types are declared here and
 * every function is looked up when first called (the real NCCL: the next definition after
 * this library, or a libnccl.so.2 loaded RTLD_LOCAL, as PyTorch's is; the CUDA driver API:
 * libcuda.so.1, which every CUDA program has loaded). So it loads into any program, and does
 * nothing in one that never calls NCCL. Without the driver API it counts a collective
 * completed when its call returns. Past 4096 collectives in flight, the rest also count
 * completed at their return, rather than block the caller. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rank/rank_channel.h"

#define EXPORT __attribute__((visibility("default")))

typedef int ncclResult_t;
typedef void* ncclComm_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef void* cudaStream_t;
enum { kNcclInternalError = 3 };

typedef int CUresult;
typedef void* CUevent;
typedef void* CUcontext;
enum { kCudaSuccess = 0, kCudaNotReady = 600, kEventDisableTiming = 0x2 };

static struct {
  CUresult (*ctx_get_current)(CUcontext*);
  CUresult (*ctx_set_current)(CUcontext);
  CUresult (*event_create)(CUevent*, unsigned);
  CUresult (*event_record)(CUevent, cudaStream_t);
  CUresult (*event_query)(CUevent);
  int usable;
} cu;

static struct rm_rank_channel* channel;
static uint64_t private_counters[2]; /* where counts go without a channel */
static pthread_once_t once = PTHREAD_ONCE_INIT;

#define kSlots 4096
struct pending {
  CUevent event;
  CUcontext context;
  uint64_t collectives; /* 0: free */
};
static struct pending slots[kSlots];
static CUevent free_events[kSlots];
static int free_count;
static int in_flight;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static int poller_started;

/* Per thread, as NCCL's groups are. */
static __thread int group_depth;
static __thread uint64_t group_collectives;
static __thread cudaStream_t group_stream;

static void add(int completed, uint64_t n) {
  uint64_t* counter = channel != NULL ? (completed ? &channel->collectives_completed
                                                   : &channel->collectives_entered)
                                      : &private_counters[completed];
  __atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

static void* driver_symbol(void* lib, const char* name) {
  void* fn = dlsym(RTLD_DEFAULT, name);
  return fn != NULL || lib == NULL ? fn : dlsym(lib, name);
}

/* A forked child (a data loader's worker) has no CUDA context and no poller, and the lock may
 * have been held by the poller at the fork: it starts over, counting at return. */
static void after_fork_in_child(void) {
  pthread_mutex_init(&mu, NULL);
  pthread_cond_init(&work, NULL);
  memset(slots, 0, sizeof(slots));
  free_count = 0;
  in_flight = 0;
  poller_started = 0;
  cu.usable = 0;
}

static void init(void) {
  pthread_atfork(NULL, NULL, after_fork_in_child);
  channel = rm_rank_channel_open(NULL);
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  cu.ctx_get_current = (CUresult(*)(CUcontext*))driver_symbol(lib, "cuCtxGetCurrent");
  cu.ctx_set_current = (CUresult(*)(CUcontext))driver_symbol(lib, "cuCtxSetCurrent");
  cu.event_create = (CUresult(*)(CUevent*, unsigned))driver_symbol(lib, "cuEventCreate");
  cu.event_record = (CUresult(*)(CUevent, cudaStream_t))driver_symbol(lib, "cuEventRecord");
  cu.event_query = (CUresult(*)(CUevent))driver_symbol(lib, "cuEventQuery");
  cu.usable = cu.ctx_get_current && cu.ctx_set_current && cu.event_create && cu.event_record &&
              cu.event_query;
}

/* Marks the pending collectives whose events the GPU has passed. Called with `mu` held. */
static void reap_locked(void) {
  CUcontext current = NULL;
  for (int i = 0; i < kSlots && in_flight > 0; ++i) {
    struct pending* p = &slots[i];
    if (p->collectives == 0) continue;
    if (p->context != current) {
      cu.ctx_set_current(p->context);
      current = p->context;
    }
    const CUresult r = cu.event_query(p->event);
    if (r == kCudaNotReady) continue;
    /* Done, or an error (a destroyed context): either way it will never be pending again. */
    add(1, p->collectives);
    p->collectives = 0;
    free_events[free_count++] = p->event;
    --in_flight;
  }
}

static void* poll_events(void* arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (in_flight == 0) pthread_cond_wait(&work, &mu);
    reap_locked();
    pthread_mutex_unlock(&mu);
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    pthread_mutex_lock(&mu);
  }
  return NULL;
}

/* A rank that exits normally has synchronised its streams: what the poller had not looked at
 * yet is done, and counted so before the wrapper reads the channel a last time. */
__attribute__((destructor)) static void reap_at_exit(void) {
  if (!cu.usable) return;
  pthread_mutex_lock(&mu);
  reap_locked();
  pthread_mutex_unlock(&mu);
}

/* After `n` collectives were enqueued on `stream` by this thread: their completion is an
 * event recorded there now. */
static void track(cudaStream_t stream, uint64_t n) {
  CUcontext context = NULL;
  if (!cu.usable || cu.ctx_get_current(&context) != kCudaSuccess || context == NULL) {
    add(1, n);
    return;
  }
  pthread_mutex_lock(&mu);
  CUevent event = NULL;
  if (in_flight < kSlots) {
    if (free_count > 0) {
      event = free_events[--free_count];
    } else if (cu.event_create(&event, kEventDisableTiming) != kCudaSuccess) {
      event = NULL;
    }
  }
  if (event == NULL || cu.event_record(event, stream) != kCudaSuccess) {
    if (event != NULL) free_events[free_count++] = event;
    pthread_mutex_unlock(&mu);
    add(1, n);
    return;
  }
  for (int i = 0; i < kSlots; ++i) {
    if (slots[i].collectives != 0) continue;
    slots[i].event = event;
    slots[i].context = context;
    slots[i].collectives = n;
    ++in_flight;
    break;
  }
  if (!poller_started) {
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    poller_started = pthread_create(&thread, &attr, poll_events, NULL) == 0;
    pthread_attr_destroy(&attr);
  }
  pthread_cond_signal(&work);
  const int polled = poller_started;
  pthread_mutex_unlock(&mu);
  /* Without a poller nothing would ever complete them. */
  if (!polled) {
    pthread_mutex_lock(&mu);
    reap_locked();
    pthread_mutex_unlock(&mu);
  }
}

/* NCCL's function `name`: the next definition after this library, else libnccl.so.2's when a
 * library loaded with RTLD_LOCAL brought it in. */
static void* real(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn != NULL) return fn;
  void* nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (nccl == NULL) nccl = dlopen("libnccl.so", RTLD_NOW | RTLD_NOLOAD);
  fn = nccl != NULL ? dlsym(nccl, name) : NULL;
  if (fn == NULL) fprintf(stderr, "libringmaster_nccl: %s not found in any loaded NCCL\n", name);
  return fn;
}

/* In function `name`: its real counterpart as name##_real, or an error return. Threads may
 * look it up at once; they find the same function. */
#define REAL(name)                                                                 \
  static __typeof__(name)* name##_found;                                           \
  pthread_once(&once, init);                                                       \
  __typeof__(name)* name##_real = __atomic_load_n(&name##_found, __ATOMIC_ACQUIRE); \
  if (name##_real == NULL) {                                                       \
    name##_real = (__typeof__(name)*)real(#name);                                  \
    __atomic_store_n(&name##_found, name##_real, __ATOMIC_RELEASE);                \
  }                                                                                \
  if (name##_real == NULL) return kNcclInternalError

static void entered(void) { add(0, 1); }

static ncclResult_t finish(ncclResult_t result, cudaStream_t stream) {
  if (group_depth > 0) {
    if (result == 0) {
      ++group_collectives;
      group_stream = stream;
    } else {
      add(1, 1); /* refused: nothing was enqueued */
    }
    return result;
  }
  if (result == 0) {
    track(stream, 1);
  } else {
    add(1, 1);
  }
  return result;
}

EXPORT ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  REAL(ncclAllReduce);
  entered();
  return finish(ncclAllReduce_real(send, recv, count, type, op, comm, stream), stream);
}

EXPORT ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type,
                                  int root, ncclComm_t comm, cudaStream_t stream) {
  REAL(ncclBroadcast);
  entered();
  return finish(ncclBroadcast_real(send, recv, count, type, root, comm, stream), stream);
}

EXPORT ncclResult_t ncclBcast(void* buffer, size_t count, ncclDataType_t type, int root,
                              ncclComm_t comm, cudaStream_t stream) {
  REAL(ncclBcast);
  entered();
  return finish(ncclBcast_real(buffer, count, type, root, comm, stream), stream);
}

EXPORT ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  REAL(ncclReduce);
  entered();
  return finish(ncclReduce_real(send, recv, count, type, op, root, comm, stream), stream);
}

EXPORT ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                                  ncclComm_t comm, cudaStream_t stream) {
  REAL(ncclAllGather);
  entered();
  return finish(ncclAllGather_real(send, recv, count, type, comm, stream), stream);
}

EXPORT ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count,
                                      ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream) {
  REAL(ncclReduceScatter);
  entered();
  return finish(ncclReduceScatter_real(send, recv, count, type, op, comm, stream), stream);
}

EXPORT ncclResult_t ncclGroupStart(void) {
  REAL(ncclGroupStart);
  const ncclResult_t result = ncclGroupStart_real();
  if (result == 0 && group_depth++ == 0) group_collectives = 0;
  return result;
}

EXPORT ncclResult_t ncclGroupEnd(void) {
  REAL(ncclGroupEnd);
  const ncclResult_t result = ncclGroupEnd_real();
  if (group_depth > 0 && --group_depth == 0 && group_collectives > 0) {
    const uint64_t n = group_collectives;
    group_collectives = 0;
    if (result == 0) {
      track(group_stream, n);
    } else {
      add(1, n);
    }
  }
  return result;
}
