/* The environment a worker gives the processes of a rank, by name: the contract between the
 * worker (services/worker/core/launch.cc sets them) and what runs inside a rank (the trainer,
 * ringmaster-check, the preloaded collective counter), which read them. Plain C, header-only,
 * no dependencies: the counter library is C and loads into any program. docs/workers.md,
 * "Environment of every rank", says what each one holds. */
#ifndef RINGMASTER_LIBS_RANK_RANK_ENV_H_
#define RINGMASTER_LIBS_RANK_RANK_ENV_H_

/* torch.distributed's names, for programs that do their own rendezvous. */
#define RM_ENV_RANK "RANK"
#define RM_ENV_WORLD_SIZE "WORLD_SIZE"
#define RM_ENV_LOCAL_RANK "LOCAL_RANK"
#define RM_ENV_LOCAL_WORLD_SIZE "LOCAL_WORLD_SIZE"
#define RM_ENV_MASTER_ADDR "MASTER_ADDR"
#define RM_ENV_MASTER_PORT "MASTER_PORT"

/* Ringmaster's own. */
#define RM_ENV_RINGMASTER_RANK "RINGMASTER_RANK"
#define RM_ENV_WORKER_ID "RINGMASTER_WORKER_ID"
#define RM_ENV_WORKER_ADDRESS "RINGMASTER_WORKER_ADDRESS"
#define RM_ENV_QUEUE "RINGMASTER_QUEUE"
#define RM_ENV_GPU_TYPE "RINGMASTER_GPU_TYPE"
#define RM_ENV_SIMULATED_GPUS "RINGMASTER_SIMULATED_GPUS"
#define RM_ENV_METRICS_ADDR "RINGMASTER_METRICS_ADDR"
#define RM_ENV_CHECKPOINT_DIR "RINGMASTER_CHECKPOINT_DIR"
/* A rank holding a share of one GPU (docs/gpu-sharing.md): the share as a decimal fraction of
 * a GPU ("0.25"), and the device memory it may use in bytes (set only when the job limits it).
 * Whole-GPU and CPU ranks get neither. */
#define RM_ENV_GPU_SHARE "RINGMASTER_GPU_SHARE"
#define RM_ENV_GPU_MEMORY "RINGMASTER_GPU_MEMORY"
/* The pre-run check inside MPI_Init: where rank 0 writes its result (check_result.h), and a
 * delay before every allreduce of it (a slow host on purpose, for tests). */
#define RM_ENV_PRECHECK_RESULT "RINGMASTER_PRECHECK_RESULT"
#define RM_ENV_CHECK_DELAY_MS "RINGMASTER_CHECK_DELAY_MS"
/* Other collective counter libraries to preload than those beside ringmaster-rank. */
#define RM_ENV_PMPI_LIBRARY "RINGMASTER_PMPI_LIBRARY"
#define RM_ENV_NCCL_LIBRARY "RINGMASTER_NCCL_LIBRARY"
/* Set for ranks in containers: the Open MPI version of the workers' mpirun ("4.1.4"). The
 * PMPI counter refuses an MPI_Init of another release series with a message that says so. */
#define RM_ENV_HOST_OPEN_MPI "RINGMASTER_HOST_OPEN_MPI"

#endif /* RINGMASTER_LIBS_RANK_RANK_ENV_H_ */
