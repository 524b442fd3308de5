/* A stand-in for NCCL and the CUDA driver API, to test libringmaster_nccl.so without a GPU:
 * every NCCL call succeeds at once, and an event counts as passed once the test sets
 * fake_gpu_done (a GPU that has got through everything enqueued). */
#include <stddef.h>

int fake_gpu_done = 0;
int fake_nccl_calls = 0;

static int call(void) {
  __atomic_fetch_add(&fake_nccl_calls, 1, __ATOMIC_RELAXED);
  return 0;
}

int ncclAllReduce(const void* s, void* r, size_t n, int t, int op, void* comm, void* stream) {
  (void)s, (void)r, (void)n, (void)t, (void)op, (void)comm, (void)stream;
  return call();
}
int ncclBroadcast(const void* s, void* r, size_t n, int t, int root, void* comm, void* stream) {
  (void)s, (void)r, (void)n, (void)t, (void)root, (void)comm, (void)stream;
  return call();
}
int ncclGroupStart(void) { return 0; }
int ncclGroupEnd(void) { return 0; }

int cuCtxGetCurrent(void** context) {
  *context = (void*)1;
  return 0;
}
int cuCtxSetCurrent(void* context) {
  (void)context;
  return 0;
}
int cuEventCreate(void** event, unsigned flags) {
  static long next;
  (void)flags;
  *event = (void*)__atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
  return 0;
}
int cuEventRecord(void* event, void* stream) {
  (void)event, (void)stream;
  return 0;
}
int cuEventQuery(void* event) {
  (void)event;
  return __atomic_load_n(&fake_gpu_done, __ATOMIC_ACQUIRE) ? 0 : 600 /* not ready */;
}
