// Where a worker keeps the files of the attempts it holds: logs, hostfile and check results
// under the log directory, Open MPI's session directories, the jobs' checkpoint directories.
// Names only; nothing is created or read here. Immutable after construction, so any thread may
// read it.
#ifndef RINGMASTER_SERVICES_WORKER_CORE_LAYOUT_H_
#define RINGMASTER_SERVICES_WORKER_CORE_LAYOUT_H_

#include <cstdint>
#include <string>

namespace ringmaster::worker {

// ".HASH" of the worker id, a hash that stays the same across builds and restarts: names this
// worker's session directories, so that a restart finds those of its earlier life.
std::string SessionSuffix(const std::string& worker_id);

// Open MPI's session directories when no --mpi-tmpdir is given: /tmp/ringmaster-mpi-UID.
std::string DefaultSessionRoot(uint32_t euid);

struct WorkerLayout {
  // Root of the rank logs.
  std::string log_dir;
  // Open MPI keeps its session directories (PMIx rendezvous files among them) under
  // TMPDIR/ompi.HOST.UID/jf.JOBFAMILY, one tree for every daemon of a job on a host. Fake hosts
  // on one machine share it, and their concurrent creation and cleanup of it fail
  // ("mkdir ... File exists"). So every process tree of an attempt on this worker gets its own
  // root: session_root/JOB.ATTEMPT.SUFFIX/{mpirun,orted}, removed when the attempt is
  // forgotten (and, for an earlier life's attempts, at start).
  std::string session_root;
  std::string session_suffix;  // SessionSuffix(worker id)
  // Parent of each job's checkpoint directory; empty: none.
  std::string checkpoint_root;

  // LOG_DIR/JOB/ATTEMPT: the hostfile, mpirun.log (launcher.log for a one-rank attempt started
  // without mpirun), check.log, check.result, rank-R.log.
  std::string AttemptDir(const std::string& job_id, int32_t attempt) const;
  // LOG_DIR/JOB/ATTEMPT/rank-R.log.
  std::string RankLogPath(const std::string& job_id, int32_t attempt, int32_t rank) const;
  // Where rank 0 of the attempt writes its check's result: with --run-as (`as_team_user`), in
  // a directory the team's user owns, as the attempt's directory is root's.
  std::string CheckResultPath(const std::string& job_id, int32_t attempt, bool as_team_user) const;
  // The attempt's own root of Open MPI session directories (see session_root).
  std::string SessionBase(const std::string& job_id, int32_t attempt) const;
  // Whether `name`, an entry of session_root, is a session base of this worker.
  bool IsOwnSessionBase(const std::string& name) const;
  // CHECKPOINT_ROOT/JOB, kept across attempts; empty without a checkpoint root.
  std::string CheckpointDir(const std::string& job_id) const;
  // session_root/mps.SUFFIX: the directories of this worker's MPS control daemon (pipe/ and
  // log/, core/gpu_share.h), on local disk as NVIDIA asks, and one per worker as its daemon is.
  // Its name is one of IsOwnSessionBase's, so an earlier life's is removed at start too.
  std::string MpsDir() const;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_SERVICES_WORKER_CORE_LAYOUT_H_
