"""Ringmaster's Python client: submit, watch, wait for and cancel distributed training jobs.

    import ringmaster

    client = ringmaster.Client("localhost:7070")
    job = client.submit("train.yaml", replicas=4)
    for event in client.watch(job):
        print(event.state, event.reason)
    print("".join(client.logs(job)))

See :class:`Client` for every call, :mod:`ringmaster.errors` for the exceptions, and
docs/python.md for a walkthrough. The messages and gRPC stubs (``ringmaster.v1``) are
generated from proto/ by the CMake build into ``BUILD/python``; put both directories on the
path: ``PYTHONPATH=python:build/python``.
"""

import pkgutil as _pkgutil

# The generated ringmaster.v1 lives in the build directory (or beside this package once
# installed); every `ringmaster` directory on sys.path is part of this package.
__path__ = _pkgutil.extend_path(__path__, __name__)

try:
    from ringmaster.v1 import job_pb2 as _job_pb2  # noqa: F401
except ImportError as _e:  # pragma: no cover
    raise ImportError(
        "ringmaster: the generated gRPC stubs (ringmaster.v1) were not found. Build them with "
        "`cmake --build BUILD --target ringmaster_python_stubs` and add BUILD/python to "
        "PYTHONPATH (next to this package's directory, python/). Needs Debian's "
        f"python3-grpcio and python3-protobuf. ({_e})"
    ) from _e

from . import errors
from .client import DEFAULT_SCHEDULER, SCHEDULER_ENV, Client, TLSConfig
from .errors import (
    AlreadyExists,
    CertificateNotTrusted,
    FailedPrecondition,
    InvalidArgument,
    InvalidSpec,
    JobCancelled,
    JobFailed,
    NotFound,
    RingmasterError,
    Unavailable,
    WaitTimeout,
)
from .spec import spec_from_dict, spec_to_dict
from .types import ArrayStatus, Job, JobEvent, JobState, RankPlacement

__all__ = [
    "Client",
    "TLSConfig",
    "Job",
    "JobEvent",
    "JobState",
    "RankPlacement",
    "ArrayStatus",
    "errors",
    "RingmasterError",
    "InvalidArgument",
    "InvalidSpec",
    "NotFound",
    "AlreadyExists",
    "FailedPrecondition",
    "Unavailable",
    "CertificateNotTrusted",
    "JobFailed",
    "JobCancelled",
    "WaitTimeout",
    "spec_from_dict",
    "spec_to_dict",
    "DEFAULT_SCHEDULER",
    "SCHEDULER_ENV",
]
