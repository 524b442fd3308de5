"""Exceptions raised by the Ringmaster client.

Every failed call raises a subclass of :class:`RingmasterError`. Errors that came from a gRPC
call carry its status code (``grpc.StatusCode``) in ``code`` and the server's message in
``message``, so ``str(error)`` is what the scheduler said, for example::

    ringmaster.errors.InvalidSpec: replicas: must be 1..4096, got 0

Catch the specific class (``NotFound``, ``InvalidSpec``, ``Unavailable``, ...) for the cases a
program handles, and :class:`RingmasterError` for the rest.
"""

from __future__ import annotations

import enum
from typing import Dict, Optional, Protocol, Type

import grpc


class EndedJob(Protocol):
    """What the job-carrying errors read of a :class:`ringmaster.Job`. A protocol rather than an
    import of ``types``, which imports ``spec``, which imports this module: no cycle."""

    id: str
    state: enum.Enum
    message: str
    exit_code: int

__all__ = [
    "RingmasterError",
    "InvalidArgument",
    "InvalidSpec",
    "NotFound",
    "AlreadyExists",
    "FailedPrecondition",
    "PermissionDenied",
    "Unauthenticated",
    "ResourceExhausted",
    "Unavailable",
    "CertificateNotTrusted",
    "DeadlineExceeded",
    "Cancelled",
    "Internal",
    "JobFailed",
    "JobCancelled",
    "WaitTimeout",
    "from_rpc_error",
]


class RingmasterError(Exception):
    """Base class of every error the client raises.

    Attributes:
        code: The gRPC status code of the failed call, or None for errors that did not come
            from a call (a job that ended FAILED, a wait that timed out).
        message: The server's message (or the client's, for client-side errors).
    """

    code: Optional[grpc.StatusCode] = None

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message


class InvalidArgument(RingmasterError):
    """The request was malformed (INVALID_ARGUMENT): fix the input, do not retry."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class InvalidSpec(InvalidArgument):
    """A job spec was rejected, by the scheduler or already by the client (a YAML file with an
    unknown key, a string where a number belongs). The message names the field, e.g.
    ``replicas: must be 1..4096, got 0``."""


class NotFound(RingmasterError):
    """No such job (or log, or worker)."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(RingmasterError):
    """A request id was reused with a different spec."""

    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(RingmasterError):
    """The call does not fit the job's state, e.g. cancelling a job that already ended."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class PermissionDenied(RingmasterError):
    """The caller is known but not allowed to do this."""

    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(RingmasterError):
    """No valid credentials (a missing or wrong bearer token)."""

    code = grpc.StatusCode.UNAUTHENTICATED


class ResourceExhausted(RingmasterError):
    """A quota or a size limit was hit."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(RingmasterError):
    """Nobody answered (the scheduler is down, restarting, or the address is wrong). Safe to
    retry; ``Client.submit`` already retries with the same request id."""

    code = grpc.StatusCode.UNAVAILABLE


class CertificateNotTrusted(Unavailable):
    """The scheduler answered, but its TLS certificate did not verify against the CA the client
    was given (``tls``, ``$RINGMASTER_TLS_CA`` or ``tls_ca`` in the config file). Never retried:
    it stays untrusted."""


class DeadlineExceeded(RingmasterError, TimeoutError):
    """The call took longer than its deadline."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Cancelled(RingmasterError):
    """The call was cancelled on the client's side."""

    code = grpc.StatusCode.CANCELLED


class Internal(RingmasterError):
    """The server failed (INTERNAL, UNKNOWN, DATA_LOSS, UNIMPLEMENTED): a bug to report."""

    code = grpc.StatusCode.INTERNAL


class JobFailed(RingmasterError):
    """Raised by ``Client.wait`` when the job ended FAILED. ``job`` is the final job; the
    message says why (the job's own message, e.g. ``rank 1 exited with code 3``)."""

    def __init__(self, job: EndedJob) -> None:
        why = job.message or f"exit code {job.exit_code}"
        super().__init__(f"job {job.id} ended {job.state.value}: {why}")
        self.job = job


class JobCancelled(JobFailed):
    """Raised by ``Client.wait`` when the job ended CANCELLED."""


class WaitTimeout(RingmasterError, TimeoutError):
    """Raised by ``Client.wait`` when the job had not ended within the timeout. ``job`` is the
    job as last seen."""

    def __init__(self, job: EndedJob, timeout: float) -> None:
        super().__init__(
            f"job {job.id} still {job.state.value} after {timeout:g} s"
        )
        self.job = job


_BY_CODE: Dict[grpc.StatusCode, Type[RingmasterError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.ABORTED: FailedPrecondition,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.INTERNAL: Internal,
    grpc.StatusCode.UNKNOWN: Internal,
    grpc.StatusCode.DATA_LOSS: Internal,
    grpc.StatusCode.UNIMPLEMENTED: Internal,
}


def from_rpc_error(
    error: grpc.RpcError, *, spec_call: bool = False
) -> RingmasterError:
    """Turns a failed gRPC call into the matching :class:`RingmasterError`.

    ``spec_call`` marks a submit, whose INVALID_ARGUMENT is an :class:`InvalidSpec`.
    """
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else None
    message = details or (code.name if code is not None else str(error))
    cls = _BY_CODE.get(code, RingmasterError)
    lower = message.lower()
    if cls is Unavailable and (
        "certificate verify failed" in lower or "certificate_verify_failed" in lower
    ):
        cls = CertificateNotTrusted
        message = (
            "the scheduler answered, but its TLS certificate is not trusted: give the CA that "
            "signed it (Client(tls={'ca': PATH}), RINGMASTER_TLS_CA or tls_ca in "
            "${XDG_CONFIG_HOME:-~/.config}/ringmaster/config, which the quickstart writes) "
            f"({message})"
        )
    if spec_call and cls is InvalidArgument:
        cls = InvalidSpec
    return cls(message, code)
