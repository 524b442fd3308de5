"""The Ringmaster job API from Python: :class:`Client`."""

from __future__ import annotations

import dataclasses
import os
import re
import time
import uuid
from typing import Any, Callable, Iterator, List, Mapping, Optional, Tuple, TypeVar, Union

import grpc

from ringmaster.v1 import job_pb2, job_pb2_grpc
from ringmaster.v1 import queue_pb2, queue_pb2_grpc, volume_pb2, volume_pb2_grpc, worker_pb2_grpc
from ringmaster.v1 import registry_pb2, registry_pb2_grpc

from . import errors
from .config import ClientConfig, load_config
from .spec import SpecLike, build_spec
from .types import Job, JobEvent, JobState

__all__ = ["Client", "TLSConfig", "DEFAULT_SCHEDULER", "SCHEDULER_ENV"]

#: Where ``Client()`` connects when neither ``address`` nor ``$RINGMASTER_SCHEDULER`` is given
#: (the same default as ``ringctl``).
DEFAULT_SCHEDULER = "localhost:7070"
#: The environment variable ``Client()`` and ``ringctl`` read the scheduler's address from.
SCHEDULER_ENV = "RINGMASTER_SCHEDULER"

JobRef = Union[str, Job]
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class TLSConfig:
    """How to reach the scheduler over TLS.

    Attributes:
        ca: PEM file of the certificate authority to trust; None uses the system's roots.
        cert: PEM file of this client's certificate, for mutual TLS (with ``key``).
        key: PEM file of this client's private key.
        server_name: The name to check the server's certificate against, when it differs
            from the address's host (an IP address, a tunnel).
    """

    ca: Optional[str] = None
    cert: Optional[str] = None
    key: Optional[str] = None
    server_name: Optional[str] = None

    def credentials(self) -> grpc.ChannelCredentials:
        if (self.cert is None) != (self.key is None):
            raise ValueError("tls: give cert and key together (mutual TLS), or neither")

        def read(path: Optional[str]) -> Optional[bytes]:
            if path is None:
                return None
            with open(path, "rb") as f:
                return f.read()

        return grpc.ssl_channel_credentials(
            root_certificates=read(self.ca),
            private_key=read(self.key),
            certificate_chain=read(self.cert),
        )


TLSLike = Union[TLSConfig, Mapping[str, Optional[str]], bool, None]


def _tls_from_environment(file: Optional[ClientConfig]) -> Optional[TLSConfig]:
    """What ringctl reads: TLS unless RINGMASTER_INSECURE=1 (else the config file's
    ``insecure``); each path from the environment, else from the config file."""
    insecure = os.environ.get("RINGMASTER_INSECURE")
    if insecure is not None:
        if insecure in ("1", "true"):
            return None
    elif file is not None and file.insecure:
        return None

    def env(name: str, fallback: Optional[str]) -> Optional[str]:
        return os.environ.get(name) or fallback

    return TLSConfig(
        ca=env("RINGMASTER_TLS_CA", file.tls_ca if file else None),
        cert=env("RINGMASTER_TLS_CERT", file.tls_cert if file else None),
        key=env("RINGMASTER_TLS_KEY", file.tls_key if file else None),
    )


def _tls_config(tls: TLSLike, file: Optional[ClientConfig] = None) -> Optional[TLSConfig]:
    if tls is None:
        return _tls_from_environment(file)
    if tls is False:
        return None
    if tls is True:
        return TLSConfig()
    if isinstance(tls, TLSConfig):
        return tls
    if isinstance(tls, Mapping):
        unknown = sorted(set(tls) - {"ca", "cert", "key", "server_name"})
        if unknown:
            raise ValueError(
                f"tls: unknown key(s) {', '.join(unknown)} (ca, cert, key, server_name)"
            )
        return TLSConfig(**tls)
    raise TypeError(f"tls must be a TLSConfig, a dict, True or None, got {type(tls).__name__}")


def _enum_value(enum: Any, prefix: str, setting: str, value: str) -> int:
    """"LowerPriority" -> PREFIX_LOWER_PRIORITY."""
    name = prefix + re.sub(r"(?<!^)(?=[A-Z])", "_", value).upper()
    try:
        return enum.Value(name)
    except ValueError:
        raise ValueError(f"{setting}: unknown value {value!r}") from None


def _queue_proto(name: str, settings: Mapping[str, Any]) -> "queue_pb2.Queue":
    known = {"cohort", "weight", "quotas", "within_queue", "reclaim_within_cohort",
             "min_runtime_seconds", "elastic_idle_delay_seconds"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise TypeError(f"unknown queue setting(s): {', '.join(unknown)}")
    q = queue_pb2.Queue(name=name, cohort=settings.get("cohort", ""),
                        weight=settings.get("weight", 1),
                        min_runtime_seconds=settings.get("min_runtime_seconds", 0))
    for resource, quota in (settings.get("quotas") or {}).items():
        if isinstance(quota, Mapping):
            q.resources[resource].nominal = quota.get("nominal", 0)
            for limit in ("borrowing_limit", "lending_limit"):
                if quota.get(limit) is not None:
                    setattr(q.resources[resource], limit, quota[limit])
        else:
            q.resources[resource].nominal = quota
    if "within_queue" in settings:
        q.within_queue = _enum_value(queue_pb2.PreemptWithinQueue, "PREEMPT_WITHIN_QUEUE_",
                                     "within_queue", settings["within_queue"])
    if "reclaim_within_cohort" in settings:
        q.reclaim_within_cohort = _enum_value(queue_pb2.ReclaimWithinCohort,
                                              "RECLAIM_WITHIN_COHORT_", "reclaim_within_cohort",
                                              settings["reclaim_within_cohort"])
    if settings.get("elastic_idle_delay_seconds") is not None:
        q.elastic_idle_delay_seconds = settings["elastic_idle_delay_seconds"]
    return q


def _volume_proto(name: str, host_path: str, grants: Optional[Mapping[str, bool]],
                  description: str) -> "volume_pb2.Volume":
    volume = volume_pb2.Volume(name=name, host_path=host_path, description=description)
    for team, read_only in (grants or {}).items():
        volume.grants.add(team=team, read_only=bool(read_only))
    return volume


def _label_selector(labels: Union[str, Mapping[str, str], None]) -> str:
    if labels is None:
        return ""
    if isinstance(labels, str):
        return labels
    if isinstance(labels, Mapping):
        return ",".join(f"{k}={v}" for k, v in labels.items())
    raise TypeError(f"labels must be a selector string or a dict, got {type(labels).__name__}")


def _job_id(job: JobRef) -> str:
    if isinstance(job, Job):
        return job.id
    if isinstance(job, str):
        return job
    raise TypeError(f"expected a job id or a Job, got {type(job).__name__}")



TOKEN_ENV = "RINGMASTER_TOKEN"


def resolve_token() -> Optional[str]:
    """The bearer token the way ringctl finds it: ``$RINGMASTER_TOKEN``, else the first line of
    ``${XDG_CONFIG_HOME:-~/.config}/ringmaster/token``; None when neither has one."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if token:
        return token
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    try:
        with open(os.path.join(config, "ringmaster", "token"), encoding="utf-8") as f:
            return f.readline().strip() or None
    except OSError:
        return None

class Client:
    """A connection to a Ringmaster scheduler: submit, inspect, watch and cancel jobs.

    Example::

        import ringmaster

        client = ringmaster.Client("localhost:7070")
        job = client.submit(name="smoke", replicas=2, command=["hostname"])
        job = client.wait(job)              # raises JobFailed unless it SUCCEEDED
        print("".join(client.logs(job)))    # rank 0's output

    Every method raises a :class:`ringmaster.errors.RingmasterError` subclass on failure
    (``InvalidSpec``, ``NotFound``, ``Unavailable``, ...), carrying the gRPC status code and
    the scheduler's message. Unary calls have a deadline (``timeout``); streams (``watch``,
    ``logs`` with ``follow``) last as long as the job.

    A Client holds one gRPC channel; it is safe to share between threads. Close it with
    :meth:`close` or use it as a context manager.
    """

    def __init__(
        self,
        address: Optional[str] = None,
        token: Optional[str] = None,
        tls: TLSLike = None,
        *,
        timeout: float = 10.0,
        retry_seconds: float = 30.0,
    ) -> None:
        """Opens a channel to the scheduler (it connects on the first call).

        Args:
            address: The scheduler's ``host:port`` (any gRPC target, e.g. ``dns:///h:7070``).
                Defaults to ``$RINGMASTER_SCHEDULER``, then ``scheduler`` in the config file
                (:mod:`ringmaster.config`, the file ringctl reads), then ``localhost:7070``.
            token: A bearer token, sent as ``authorization: Bearer TOKEN`` on every call.
                Defaults, as for ringctl, to ``$RINGMASTER_TOKEN``, then the first line of
                ``${XDG_CONFIG_HOME:-~/.config}/ringmaster/token``.
            tls: None (the default) reads the environment as ringctl does: TLS, verified
                against ``$RINGMASTER_TLS_CA`` (else the system's roots), with the client
                certificate ``$RINGMASTER_TLS_CERT``/``$RINGMASTER_TLS_KEY`` if set, or
                plaintext when ``$RINGMASTER_INSECURE`` is 1; what the environment leaves
                unset comes from the config file (``tls_ca``, ``tls_cert``, ``tls_key``,
                ``insecure``). ``False`` for plaintext;
                ``True`` for TLS with the system's roots; a :class:`TLSConfig` or a dict with
                ``ca``, ``cert``, ``key`` (paths to PEM files) and ``server_name``.
            timeout: Deadline in seconds of every unary call.
            retry_seconds: How long ``submit`` and ``wait`` keep retrying a scheduler that does
                not answer (waits of 0.25, 0.5, 1, then 2 s, the same request id every time);
                the default rides out a scheduler failover (a crashed leader's lease passes
                on after 10 s). 0: one attempt.
        """
        file = load_config() if not address or tls is None else None
        self.address = (
            address
            or os.environ.get(SCHEDULER_ENV)
            or (file.scheduler if file else None)
            or DEFAULT_SCHEDULER
        )
        self.timeout = timeout
        if retry_seconds < 0:
            raise ValueError(f"retry_seconds: must not be negative, got {retry_seconds}")
        self.retry_seconds = retry_seconds
        self._tls = _tls_config(tls, file)
        token = token or resolve_token()
        self._metadata: Tuple[Tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        self._channel = self._open_channel(self.address)
        # The channel's state, kept by gRPC's own thread: retries wait differently when the
        # scheduler is connected but answered UNAVAILABLE (see _await_retry).
        self._connectivity = grpc.ChannelConnectivity.IDLE
        self._channel.subscribe(self._on_connectivity, try_to_connect=False)
        self._jobs = job_pb2_grpc.JobServiceStub(self._channel)
        self._cluster = worker_pb2_grpc.ClusterServiceStub(self._channel)
        self._queues = queue_pb2_grpc.QueueServiceStub(self._channel)
        self._volumes = volume_pb2_grpc.VolumeServiceStub(self._channel)
        self._registries = registry_pb2_grpc.RegistryServiceStub(self._channel)

    # -- life of the client --------------------------------------------------------------

    def close(self) -> None:
        """Closes the channel; calls in progress are cancelled."""
        self._channel.unsubscribe(self._on_connectivity)
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.address!r}{', tls' if self._tls else ''})"

    # -- jobs ----------------------------------------------------------------------------

    def submit(
        self,
        spec: SpecLike = None,
        *,
        request_id: Optional[str] = None,
        **fields: Any,
    ) -> Job:
        """Submits a job and returns it (normally PENDING).

        Args:
            spec: A dict in the YAML form of docs/examples/job.yaml, the path of such a YAML
                file, a ``ringmaster.v1.JobSpec``, or None to build the spec from keywords.
            request_id: The idempotency key (1..128 of ``[A-Za-z0-9._:-]``). Submitting again
                with the same id returns the same job (``job.existing`` is True) instead of a
                second one; with a different spec it raises ``AlreadyExists``. Defaults to a
                fresh random id.
            **fields: Spec fields on top of ``spec``, as ``ringctl submit``'s flags: ``name``,
                ``replicas`` (N, or ``"MIN:MAX"`` for an elastic job, as ringctl's
                --replicas; or ``min_replicas`` and ``max_replicas``), ``sizes_divide`` (an
                elastic job runs only at sizes that divide it), ``gpus_per_replica``,
                ``gpu_type``, ``gpu_share`` (a fraction of one GPU per rank, ``0.25``; sets
                ``gpus_per_replica`` 1) and ``gpu_memory`` (``"10Gi"`` or bytes; see
                docs/gpu-sharing.md), ``queue``, ``priority``,
                ``restart_policy`` (``"Never"``/``"OnFailure"``), ``backoff_limit``,
                ``max_runtime_seconds``, ``labels`` (merged), ``command`` (a list of strings:
                the program every rank runs), ``env`` (the command's environment), and the
                built-in trainer's ``model``, ``steps``, ``batch_size``,
                ``checkpoint_every``; the environment (docs/environments.md): ``image``,
                ``mounts`` (a list of ``{"volume", "path", "read_only"}`` dicts or
                ``"VOL:PATH[:ro|:rw]"`` strings; replaces the spec's), ``shm_size``
                (``"8Gi"`` or bytes) and ``workdir``; ``use_mpirun`` (start a one-rank job
                under mpirun rather than directly: docs/workers.md); ``after`` (jobs to wait
                for, ``"j-...:succeeded"``); ``array`` (one job per index, each told its index:
                ``"0-999%50"`` as ringctl's --array, or ``{"count": 1000, "parallelism": 50}``;
                docs/ringctl.md, "Arrays"). Keywords alone without ``command`` run the
                built-in trainer.

        Raises:
            InvalidSpec: The spec is malformed or out of range; the message names the field.
            AlreadyExists: ``request_id`` was used before with a different spec.
            Unavailable: The scheduler did not answer, after retrying (with the same request
                id, so a retry never makes a second job).

        Example::

            job = client.submit("train.yaml", replicas=8, labels={"run": "42"})
            job = client.submit({"name": "probe", "replicas": 2,
                                 "command": {"argv": ["hostname"]}})
        """
        request = job_pb2.SubmitJobRequest(
            spec=build_spec(spec, fields),
            request_id=request_id or uuid.uuid4().hex,
        )
        response = self._retry(
            lambda: self._call(self._jobs.SubmitJob, request, spec_call=True)
        )
        return Job.from_proto(response.job, existing=response.existing)

    def get(self, job: JobRef) -> Job:
        """The job as the scheduler has it now. For an array, ``job.array_status`` counts its
        tasks (waiting, pending, running, succeeded, failed, cancelled) and lists the lowest
        failed indices; a task's ``array_id`` and ``array_index`` name its array.

        Raises:
            NotFound: There is no such job.
        """
        request = job_pb2.GetJobRequest(job_id=_job_id(job))
        return Job.from_proto(self._call(self._jobs.GetJob, request))

    def list(
        self,
        state: Union[str, JobState, None] = None,
        queue: Optional[str] = None,
        labels: Union[str, Mapping[str, str], None] = None,
        limit: Optional[int] = None,
        *,
        array: Optional[JobRef] = None,
        page_size: int = 500,
    ) -> List[Job]:
        """Jobs, newest first, as ``ringctl list`` shows them: every matching job, fetched a
        page at a time (see :meth:`iter_jobs`), or the newest ``limit``. An array is one job
        (its ``array_status`` counts its tasks); its tasks are listed only with ``array``.

        Args:
            state: Only jobs in this state (``"running"``, ``JobState.FAILED``, ...).
            queue: Only jobs of this queue.
            labels: Only jobs whose labels match: a selector in kubectl's syntax
                (``"team=vision,env!=prod,gpu,!spot"``; a comma means and) or a dict of
                labels that must all be equal (``{"team": "vision"}``).
            limit: At most this many jobs; None lists them all.
            array: An array (its id or its Job): list its tasks instead, newest first, with the
                other filters applying to them.
            page_size: Jobs per call to the scheduler (at most 1000).

        Raises:
            InvalidArgument: A malformed selector; the message names the requirement.
        """
        jobs: List[Job] = []
        for job in self.iter_jobs(state, queue, labels, array=array, page_size=page_size,
                                  limit=limit):
            jobs.append(job)
        return jobs

    def iter_jobs(
        self,
        state: Union[str, JobState, None] = None,
        queue: Optional[str] = None,
        labels: Union[str, Mapping[str, str], None] = None,
        *,
        array: Optional[JobRef] = None,
        page_size: int = 500,
        limit: Optional[int] = None,
    ) -> Iterator[Job]:
        """Like :meth:`list`, but yields jobs as their pages arrive: one call per
        ``page_size`` jobs, so listing 100,000 jobs never needs one huge response."""
        request = job_pb2.ListJobsRequest(
            queue=queue or "",
            label_selector=_label_selector(labels),
            array_id=_job_id(array) if array is not None else "",
        )
        if state is not None:
            request.state = JobState.parse(state).to_proto()
        yielded = 0
        while True:
            want = page_size if limit is None else min(page_size, limit - yielded)
            if want <= 0:
                return
            request.page_size = want
            response = self._call(self._jobs.ListJobs, request)
            for job in response.jobs:
                yield Job.from_proto(job)
                yielded += 1
            if not response.next_page_token:
                return
            request.page_token = response.next_page_token

    def cancel(self, job: JobRef, reason: str = "") -> Job:
        """Stops every rank of the job and ends it CANCELLED; returns the job.

        Args:
            reason: Kept in the job's events and message (at most 256 bytes).

        Raises:
            NotFound: There is no such job.
            FailedPrecondition: The job already ended.
        """
        request = job_pb2.CancelJobRequest(job_id=_job_id(job), reason=reason)
        return Job.from_proto(self._call(self._jobs.CancelJob, request).job)

    def watch(self, job: JobRef) -> Iterator[JobEvent]:
        """Yields every event of the job so far, then new ones as they happen; the iterator
        ends after the event that enters a terminal state.

        A stream cut by a scheduler restart or fail-over is reopened (the scheduler replays
        the job's events; ones already yielded are skipped), so each seq is yielded once.

        Example::

            for event in client.watch(job):
                print(event.seq, event.state, event.reason)
        """
        request = job_pb2.WatchJobRequest(job_id=_job_id(job))
        last_seq = 0
        # Reopening a broken stream waits 0.25, 0.5, 1, then 2 s, for up to retry_seconds
        # without progress: a scheduler failover fits.
        waited = 0.0
        backoff = 0.25
        while True:
            progressed = False
            call = self._jobs.WatchJob(request, metadata=self._metadata)
            try:
                for event in call:
                    if event.seq <= last_seq:
                        continue
                    last_seq = event.seq
                    progressed = True
                    yield JobEvent.from_proto(event)
                return
            except grpc.RpcError as e:
                if progressed:
                    waited, backoff = 0.0, 0.25
                if (
                    e.code() != grpc.StatusCode.UNAVAILABLE
                    or last_seq == 0
                    or waited + backoff > self.retry_seconds
                ):
                    raise errors.from_rpc_error(e) from None
            finally:
                call.cancel()  # a no-op once the stream ended; ends it when the caller stopped
            self._await_retry(backoff)
            waited += backoff
            backoff = min(backoff * 2, 2.0)

    def wait(self, job: JobRef, timeout: Optional[float] = None) -> Job:
        """Waits until the job ends and returns the final job.

        Args:
            timeout: Seconds to wait at most; None waits as long as the job runs.

        Raises:
            JobFailed: The job ended FAILED; ``error.job`` is the final job, the message
                says why (``rank 1 exited with code 3``).
            JobCancelled: The job ended CANCELLED (a subclass of JobFailed).
            WaitTimeout: It had not ended after ``timeout`` seconds (a TimeoutError).
        """
        job_id = _job_id(job)
        deadline = None if timeout is None else time.monotonic() + timeout
        current = self.get(job_id)
        while not current.done:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise errors.WaitTimeout(current, timeout)
            request = job_pb2.WatchJobRequest(job_id=job_id)
            try:
                for _ in self._jobs.WatchJob(request, timeout=remaining, metadata=self._metadata):
                    pass
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise errors.WaitTimeout(self.get(job_id), timeout) from None
                if e.code() != grpc.StatusCode.UNAVAILABLE:
                    raise errors.from_rpc_error(e) from None
                time.sleep(0.5)
            current = self._retry(lambda: self.get(job_id))
        if current.state is JobState.CANCELLED:
            raise errors.JobCancelled(current)
        if current.state is JobState.FAILED:
            raise errors.JobFailed(current)
        return current

    def logs(
        self,
        job: JobRef,
        rank: int = 0,
        *,
        index: Optional[int] = None,
        attempt: Optional[int] = None,
        follow: bool = False,
    ) -> Iterator[str]:
        """Yields a rank's output (stdout and stderr as the rank wrote them) in pieces.

        The scheduler relays it from the worker that ran the rank, as for ``ringctl logs``
        (``JobService.ReadJobLogs``): the token needs the right ``jobs.logs`` (members and
        admins); no client certificate is needed.

        Args:
            rank: 0..replicas-1.
            index: ``job`` is an array: read the log of its task ``index`` (the job
                ``f"{array_id}-{index}"``), as ``ringctl logs ID --index I``.
            attempt: Which attempt; None means the job's current (or last) one.
            follow: Keep yielding new output until the rank has exited. A job that has not
                started yet is waited for first (until it is RUNNING or has ended).

        Raises:
            NotFound: No worker has that log (the attempt has not started, or the job is
                unknown; or task ``index`` of the array has not been created yet).
            InvalidArgument: ``rank`` is not one of the job's ranks, or ``attempt`` not one of
                its attempts; ``index`` is given for a job that is not an array, or is not one
                of its indices.
            PermissionDenied: The token lacks ``jobs.logs`` (a viewer's).

        Example::

            for piece in client.logs(job, follow=True):
                print(piece, end="")
        """
        job_id = _job_id(job) if index is None else self._task_id(job, index)
        if follow:
            current = self.get(job_id)
            if current.state in (JobState.PENDING, JobState.STARTING):
                # The rank's log exists once it started: wait for RUNNING (or the end).
                events = self.watch(current)
                try:
                    for event in events:
                        if event.state is JobState.RUNNING or event.state.terminal:
                            break
                finally:
                    events.close()  # cancels the stream
        request = job_pb2.ReadJobLogsRequest(job_id=job_id, rank=rank, follow=follow)
        if attempt is not None:
            request.attempt = attempt
        call = self._jobs.ReadJobLogs(request, metadata=self._metadata)
        try:
            for chunk in call:
                yield chunk.data.decode("utf-8", errors="replace")
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None
        finally:
            call.cancel()  # a no-op once the stream ended; ends it when the caller stopped

    def _task_id(self, array: JobRef, index: int) -> str:
        """The id of task ``index`` of ``array``, once the array is known to have such a task
        and to have created it (tasks are created in index order, so the waiting ones are the
        highest); the same checks and words as ``ringctl logs --index``."""
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise errors.InvalidArgument(f"index: expected a task index >= 0, got {index!r}")
        current = self.get(array)
        if not current.is_array:
            raise errors.InvalidArgument(
                f"index: job {current.id} is not an array; read its log without index")
        count = current.proto.spec.array.count
        if index >= count:
            raise errors.InvalidArgument(
                f"index: array {current.id} has tasks 0..{count - 1}, got {index}")
        waiting = current.array_status.waiting if current.array_status else 0
        if waiting and index >= count - waiting:
            raise errors.NotFound(
                f"task {index} of array {current.id} has not been created yet, so it has no log "
                f"({waiting} tasks wait for the parallelism limit, the array's dependencies or "
                "room)")
        return f"{current.id}-{index}"

    # -- queues (docs/fair-share.md) ---------------------------------------------------

    def create_queue(self, name: str, **settings: Any) -> "queue_pb2.QueueWithStatus":
        """Creates a queue; returns it as stored, with its status.

        Settings (all optional): ``cohort``, ``weight``, ``quotas`` (by resource, a GPU type or
        ``"cpu"``: a nominal count, or a dict with ``nominal``, ``borrowing_limit`` and
        ``lending_limit``), ``within_queue`` (``"Never"``, ``"LowerPriority"``,
        ``"LowerOrNewerEqualPriority"``), ``reclaim_within_cohort`` (``"Never"``,
        ``"LowerPriority"``, ``"Any"``), ``min_runtime_seconds`` and
        ``elastic_idle_delay_seconds`` (how long GPUs stay idle before the queue's elastic jobs
        grow into them, 1..86400; absent: the scheduler's ``--elastic-idle-delay-ms``).

        Raises:
            InvalidArgument: A setting is out of range (the message names it).
            AlreadyExists: A queue of that name exists.
        """
        request = queue_pb2.CreateQueueRequest(queue=_queue_proto(name, settings))
        return self._call(self._queues.CreateQueue, request)

    def update_queue(self, name: str, **settings: Any) -> "queue_pb2.QueueWithStatus":
        """Replaces every setting of queue ``name`` (as :meth:`create_queue` takes them)."""
        request = queue_pb2.UpdateQueueRequest(queue=_queue_proto(name, settings))
        return self._call(self._queues.UpdateQueue, request)

    def get_queue(self, name: str) -> "queue_pb2.QueueWithStatus":
        """The queue with its status: per resource in use, borrowed, lent and used_seconds
        (accounting); pending jobs."""
        return self._call(self._queues.GetQueue, queue_pb2.GetQueueRequest(name=name))

    def list_queues(self) -> List["queue_pb2.QueueWithStatus"]:
        """Every queue, by name."""
        return list(self._call(self._queues.ListQueues, queue_pb2.ListQueuesRequest()).queues)

    def delete_queue(self, name: str) -> None:
        """Deletes a queue.

        Raises:
            FailedPrecondition: The queue still has live jobs, or is ``default``.
        """
        self._call(self._queues.DeleteQueue, queue_pb2.DeleteQueueRequest(name=name))

    # -- volumes (docs/environments.md) --------------------------------------------------

    def create_volume(
        self,
        name: str,
        host_path: str,
        grants: Optional[Mapping[str, bool]] = None,
        description: str = "",
    ) -> "volume_pb2.Volume":
        """Creates a volume (admins only); returns it as stored.

        Args:
            grants: Team name -> read_only: the teams whose jobs may mount it, read-only where
                True.

        Raises:
            InvalidArgument: A field is out of range (the message names it).
            AlreadyExists: A volume of that name exists.
        """
        request = volume_pb2.CreateVolumeRequest(
            volume=_volume_proto(name, host_path, grants, description))
        return self._call(self._volumes.CreateVolume, request)

    def update_volume(
        self,
        name: str,
        host_path: str,
        grants: Optional[Mapping[str, bool]] = None,
        description: str = "",
    ) -> "volume_pb2.Volume":
        """Replaces host_path, grants and description of volume ``name`` (admins only)."""
        request = volume_pb2.UpdateVolumeRequest(
            volume=_volume_proto(name, host_path, grants, description))
        return self._call(self._volumes.UpdateVolume, request)

    def get_volume(self, name: str) -> "volume_pb2.Volume":
        """The volume; NotFound also for one not granted to your team."""
        return self._call(self._volumes.GetVolume, volume_pb2.GetVolumeRequest(name=name))

    def list_volumes(self) -> List["volume_pb2.Volume"]:
        """By name: every volume for an admin, those granted to your team otherwise."""
        return list(self._call(self._volumes.ListVolumes,
                               volume_pb2.ListVolumesRequest()).volumes)

    def delete_volume(self, name: str) -> None:
        """Deletes a volume (admins only).

        Raises:
            FailedPrecondition: A live job mounts it (the message names one).
        """
        self._call(self._volumes.DeleteVolume, volume_pb2.DeleteVolumeRequest(name=name))

    # -- registry credentials (docs/environments.md, "Private registries") ------------------

    def set_registry_credential(
        self, registry: str, username: str, secret: str, team: str = ""
    ) -> "registry_pb2.RegistryCredential":
        """Creates or replaces ``team``'s (default: your token's team) credential for the image
        registry ``registry`` (``HOST[:PORT]``). A member sets its own team's, an admin any
        team's. The answer shows everything but the secret, which no call returns.

        Raises:
            InvalidArgument: A field breaks its rule (the message names it).
            FailedPrecondition: The team has credentials for 16 other registries already.
        """
        request = registry_pb2.SetRegistryCredentialRequest(
            team=team, registry=registry, username=username, secret=secret)
        return self._call(self._registries.SetRegistryCredential, request)

    def list_registry_credentials(self, team: str = "") -> List["registry_pb2.RegistryCredential"]:
        """By team, then registry: ``team``'s (default: your token's team; ``"*"``: every team's,
        admins only), without secrets."""
        request = registry_pb2.ListRegistryCredentialsRequest(team=team)
        return list(self._call(self._registries.ListRegistryCredentials, request).credentials)

    def delete_registry_credential(self, registry: str, team: str = "") -> None:
        """Deletes ``team``'s (default: your token's team) credential for ``registry``.

        Raises:
            NotFound: The team has none for that registry.
        """
        request = registry_pb2.DeleteRegistryCredentialRequest(team=team, registry=registry)
        self._call(self._registries.DeleteRegistryCredential, request)

    # -- plumbing ------------------------------------------------------------------------

    def _open_channel(self, target: str) -> grpc.Channel:
        # gRPC waits longer and longer between reconnects (1 s growing to 2 min): after a
        # failover of 11 s a retried submit found the channel waiting 15 s more. At most 2 s,
        # as the retries themselves wait.
        options = [("grpc.max_reconnect_backoff_ms", 2000)]
        if self._tls is None:
            return grpc.insecure_channel(target, options=options)
        if self._tls.server_name:
            options.append(("grpc.ssl_target_name_override", self._tls.server_name))
        return grpc.secure_channel(target, self._tls.credentials(), options=options)

    def _on_connectivity(self, state: grpc.ChannelConnectivity) -> None:
        self._connectivity = state

    def _await_retry(self, wait: float) -> None:
        """Waits before a retry: ``wait`` seconds, or less once the scheduler can be reached
        again. Not connected, it watches the channel and returns once it connects (a channel
        with no call in flight is polled only every 5 s, so a plain sleep left a retried submit
        waiting about 15 s past a failover); connected (the scheduler itself answered
        UNAVAILABLE), it sleeps the whole wait."""
        if self._connectivity == grpc.ChannelConnectivity.READY:
            time.sleep(wait)
            return
        try:
            grpc.channel_ready_future(self._channel).result(timeout=wait)
        except grpc.FutureTimeoutError:
            pass

    def _call(self, method: Callable[..., T], request: Any, *, spec_call: bool = False) -> T:
        try:
            return method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e, spec_call=spec_call) from None

    def _retry(self, call: Callable[[], T]) -> T:
        """Retries UNAVAILABLE and DEADLINE_EXCEEDED (the answer may have been lost) with
        backoff 0.25, 0.5, 1, then 2 s, while the waits fit in ``retry_seconds``: only for
        calls that are safe to repeat."""
        backoff = 0.25
        waited = 0.0
        attempt = 0
        while True:
            attempt += 1
            try:
                return call()
            except errors.CertificateNotTrusted:
                raise
            except (errors.Unavailable, errors.DeadlineExceeded) as e:
                if waited + backoff > self.retry_seconds:
                    e.message += f" (tried {attempt} time{'' if attempt == 1 else 's'})"
                    e.args = (e.message,)
                    raise
            self._await_retry(backoff)
            waited += backoff
            backoff = min(backoff * 2, 2.0)
