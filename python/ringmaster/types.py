"""Plain Python views of the scheduler's messages: :class:`Job`, :class:`JobEvent`,
:class:`RankPlacement`, :class:`ArrayStatus` and :class:`JobState`.

They are immutable snapshots; the protobuf message each was made from stays available as
``.proto`` for fields this layer does not show.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import sys
from typing import Any, Dict, Optional, Tuple

from ringmaster.v1 import job_pb2

from .spec import spec_to_dict

__all__ = ["JobState", "Job", "JobEvent", "RankPlacement", "ArrayStatus"]

if sys.version_info >= (3, 11):
    _StrEnum = enum.StrEnum
else:  # pragma: no cover

    class _StrEnum(str, enum.Enum):
        def __str__(self) -> str:
            return str(self.value)


class JobState(_StrEnum):
    """Where a job is in its life:
    PENDING -> STARTING -> RUNNING -> SUCCEEDED | FAILED | CANCELLED, and STARTING | RUNNING ->
    PENDING for a restart. A JobState equals its name as a string (``state == "RUNNING"``)."""

    UNSPECIFIED = "UNSPECIFIED"
    PENDING = "PENDING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        """True for SUCCEEDED, FAILED and CANCELLED: nothing moves a job out of them."""
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)

    @classmethod
    def from_proto(cls, value: int) -> "JobState":
        name = job_pb2.JobState.Name(value)
        return cls(name[len("JOB_STATE_"):])

    @classmethod
    def parse(cls, text: "str | JobState") -> "JobState":
        """``"running"``, ``"RUNNING"`` or ``"JOB_STATE_RUNNING"`` -> ``JobState.RUNNING``."""
        if isinstance(text, JobState):
            return text
        key = str(text).strip().upper()
        if key.startswith("JOB_STATE_"):
            key = key[len("JOB_STATE_"):]
        try:
            state = cls(key)
        except ValueError:
            state = cls.UNSPECIFIED
        if state is cls.UNSPECIFIED:
            names = ", ".join(s.value.lower() for s in cls if s is not cls.UNSPECIFIED)
            raise ValueError(f"state: expected one of {names}, got {text!r}")
        return state

    def to_proto(self) -> int:
        return job_pb2.JobState.Value("JOB_STATE_" + self.value)


def _time(ms: int) -> Optional[datetime.datetime]:
    if not ms:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000.0, tz=datetime.timezone.utc)


@dataclasses.dataclass(frozen=True)
class RankPlacement:
    """Where one rank of a job runs."""

    rank: int
    worker_id: str
    worker_address: str
    worker_port: int
    gpu_indices: Tuple[int, ...]

    @classmethod
    def from_proto(cls, p: job_pb2.RankPlacement) -> "RankPlacement":
        return cls(
            rank=p.rank,
            worker_id=p.worker_id,
            worker_address=p.worker_address,
            worker_port=p.worker_port,
            gpu_indices=tuple(p.gpu_indices),
        )


@dataclasses.dataclass(frozen=True)
class ArrayStatus:
    """Where the tasks of an array are (docs/ringctl.md, "Arrays"); every task is counted once.

    Attributes:
        count: Tasks in all; their indices are 0..count-1.
        waiting: Not created yet: the scheduler creates tasks as the array's parallelism limit,
            its dependencies and a window of 4,096 allow.
        pending, running: Created and PENDING; STARTING or RUNNING.
        succeeded, failed, cancelled: Ended so; ``cancelled`` includes the tasks an array's
            cancellation kept from being created.
        failed_indices: The lowest indices of failed tasks, at most 100, ascending.
    """

    count: int
    waiting: int
    pending: int
    running: int
    succeeded: int
    failed: int
    cancelled: int
    failed_indices: Tuple[int, ...]

    @property
    def ended(self) -> int:
        """Tasks that have ended: succeeded, failed or cancelled."""
        return self.succeeded + self.failed + self.cancelled

    @classmethod
    def from_proto(cls, a: job_pb2.ArrayStatus) -> "ArrayStatus":
        return cls(
            count=a.count,
            waiting=a.waiting,
            pending=a.pending,
            running=a.running,
            succeeded=a.succeeded,
            failed=a.failed,
            cancelled=a.cancelled,
            failed_indices=tuple(a.failed_indices),
        )


@dataclasses.dataclass(frozen=True)
class Job:
    """A job as the scheduler stores it.

    Attributes:
        id: Scheduler-assigned id, e.g. ``"j-3f9c2a41b7d0"``.
        name: The spec's name.
        state: A :class:`JobState`.
        attempt: 0 for the first attempt, +1 at every restart.
        request_id: The request id of the submit that created the job.
        spec: The spec as the scheduler stored it (defaults filled in), as a dict in the form
            ``Client.submit`` takes: ``client.submit(job.spec)`` is a copy of the job.
        pending_reason: Why the job waits (``"needs 8 x t4, 4 free"``); empty unless PENDING.
        message: The last word on the job: failure cause or cancel reason.
        exit_code: Exit code of the first failed rank, if any.
        placement: Where each rank of the current attempt runs; empty while PENDING and after
            the job ended.
        created_at, updated_at, started_at, finished_at: UTC datetimes, None where it has not
            happened.
        existing: Set on the job ``Client.submit`` returns: True when the request id matched an
            earlier submit and no new job was created.
        proto: The ``ringmaster.v1.Job`` message.
        array_status: An array (``spec["array"]`` set): where its tasks are, as an
            :class:`ArrayStatus`; None for any other job.
        array_id, array_index: A task of an array: the array's id and the task's index (its id
            is ``f"{array_id}-{array_index}"``); ``""`` and None for any other job.
        resizes: An elastic job (``spec["min_replicas"]`` set; ``spec["sizes_divide"]``, where
            set, is the number every size it runs at divides): the events of its resizes as
            :class:`JobEvent` objects, oldest first; each ``reason`` says from what size
            to what and why (``"grown from 2 to 4 replicas: 2 x t4 idle in cohort c for 60 s"``,
            ``"shrunk from 4 to 2: queue b reclaims its nominal quota"``). Filled in by
            ``Client.get`` only; ``()`` on the jobs of ``list`` and for any other job.
    """

    id: str
    name: str
    state: JobState
    attempt: int
    request_id: str
    spec: Dict[str, Any]
    pending_reason: str
    message: str
    exit_code: int
    placement: Tuple[RankPlacement, ...]
    created_at: Optional[datetime.datetime]
    updated_at: Optional[datetime.datetime]
    started_at: Optional[datetime.datetime]
    finished_at: Optional[datetime.datetime]
    existing: bool = False
    proto: job_pb2.Job = dataclasses.field(default=None, repr=False, compare=False)
    array_status: Optional[ArrayStatus] = None
    array_id: str = ""
    array_index: Optional[int] = None
    resizes: Tuple["JobEvent", ...] = ()

    @property
    def is_array(self) -> bool:
        """True for an array, whose tasks are jobs of their own."""
        return "array" in self.spec

    @property
    def done(self) -> bool:
        """True once the job has ended (SUCCEEDED, FAILED or CANCELLED)."""
        return self.state.terminal

    @property
    def succeeded(self) -> bool:
        return self.state is JobState.SUCCEEDED

    @property
    def queue(self) -> str:
        return self.proto.spec.queue if self.proto is not None else self.spec.get("queue", "")

    @property
    def labels(self) -> Dict[str, str]:
        return dict(self.spec.get("labels", {}))

    @property
    def image_digest(self) -> str:
        """The digest the job's image is pinned to ("sha256:..."; docs/environments.md);
        empty without an image and until the first launch resolved it."""
        return self.proto.image_digest if self.proto is not None else ""

    @classmethod
    def from_proto(cls, job: job_pb2.Job, existing: bool = False) -> "Job":
        return cls(
            id=job.id,
            name=job.spec.name,
            state=JobState.from_proto(job.state),
            attempt=job.attempt,
            request_id=job.request_id,
            spec=spec_to_dict(job.spec),
            pending_reason=job.pending_reason,
            message=job.message,
            exit_code=job.exit_code,
            placement=tuple(RankPlacement.from_proto(p) for p in job.placement),
            created_at=_time(job.created_at_ms),
            updated_at=_time(job.updated_at_ms),
            started_at=_time(job.started_at_ms),
            finished_at=_time(job.finished_at_ms),
            existing=existing,
            proto=job,
            array_status=(ArrayStatus.from_proto(job.array_status)
                          if job.HasField("array_status") else None),
            array_id=job.array_id,
            array_index=job.array_index if job.array_id else None,
            resizes=tuple(JobEvent.from_proto(e) for e in job.resizes),
        )


@dataclasses.dataclass(frozen=True)
class JobEvent:
    """One state change of a job, as ``Client.watch`` yields them.

    Attributes:
        job_id: The job.
        seq: 1, 2, 3, ... per job, in order.
        state: The :class:`JobState` entered.
        attempt: The job's attempt at that point.
        reason: Why, e.g. ``"placed on w1,w2"``, ``"rank 2 exited with code 3"``.
        exit_code: Exit code where a rank exit caused the change, else 0.
        time: When, as a UTC datetime.
        proto: The ``ringmaster.v1.JobEvent`` message.
    """

    job_id: str
    seq: int
    state: JobState
    attempt: int
    reason: str
    exit_code: int
    time: Optional[datetime.datetime]
    proto: job_pb2.JobEvent = dataclasses.field(default=None, repr=False, compare=False)

    @classmethod
    def from_proto(cls, event: job_pb2.JobEvent) -> "JobEvent":
        return cls(
            job_id=event.job_id,
            seq=event.seq,
            state=JobState.from_proto(event.state),
            attempt=event.attempt,
            reason=event.reason,
            exit_code=event.exit_code,
            time=_time(event.time_ms),
            proto=event,
        )
