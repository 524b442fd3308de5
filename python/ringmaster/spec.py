"""Job specs: from a dict, a YAML file or keyword arguments to a ``ringmaster.v1.JobSpec``, and
back.

The dict form is the YAML form of ``docs/examples/job.yaml`` (the keys of ``JobSpec`` in
proto/ringmaster/v1/job.proto; the workload is a ``trainer:`` or a ``command:`` mapping;
``restart_policy`` is ``Never`` or ``OnFailure``), so a spec file, a dict and ``Job.spec`` are
interchangeable. Only structure and types are checked here, as ``ringctl`` does; ranges and
names are the scheduler's to judge, so its message is the one a user sees. The one exception,
as in ``ringctl``, is an array given in Slurm's form (``"0-999%50"``): that syntax is the
client's own, so the client says what it allows.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, Mapping, Sequence, Union

from ringmaster.v1 import job_pb2

from .errors import InvalidSpec

__all__ = ["build_spec", "load_spec_file", "spec_from_dict", "spec_to_dict", "SPEC_KEYWORDS"]

_TOP_KEYS = (
    "name",
    "queue",
    "priority",
    "replicas",
    "min_replicas",
    "max_replicas",
    "sizes_divide",
    "gpus_per_replica",
    "gpu_type",
    "gpu_share",
    "gpu_memory",
    "restart_policy",
    "backoff_limit",
    "max_runtime_seconds",
    "progress_timeout_seconds",
    "labels",
    "health_check",
    "use_mpirun",
    "after",
    "array",
    "trainer",
    "command",
    "image",
    "mounts",
    "shm_size",
    "workdir",
)
_MOUNT_KEYS = ("volume", "path", "read_only")
_ARRAY_KEYS = ("count", "parallelism")
#: Tasks an array may have (``JobArray.count`` in proto/ringmaster/v1/job.proto).
MAX_ARRAY_TASKS = 100_000
_TRAINER_KEYS = ("model", "batch_size", "steps", "checkpoint_every")
_COMMAND_KEYS = ("argv", "env", "check_in_mpi_init")
_STRING_FIELDS = ("name", "queue", "gpu_type")
_INT_FIELDS = (
    "priority",
    "replicas",
    "min_replicas",
    "max_replicas",
    "sizes_divide",
    "gpus_per_replica",
    "backoff_limit",
    "max_runtime_seconds",
)

_CONDITIONS = {
    "succeeded": job_pb2.DEPENDENCY_CONDITION_SUCCEEDED,
    "ended": job_pb2.DEPENDENCY_CONDITION_ENDED,
    "failed": job_pb2.DEPENDENCY_CONDITION_FAILED,
}
_CONDITION_NAMES = {v: k for k, v in _CONDITIONS.items()}

#: Keyword arguments ``Client.submit`` takes besides ``spec`` and ``request_id``. The spec
#: fields replace the dict's or file's value (labels are merged, a keyword winning);
#: ``command`` (a list of strings) replaces the workload, keeping a command's env, and ``env``
#: sets the command's environment; ``model``, ``steps``, ``batch_size`` and ``checkpoint_every``
#: set trainer fields.
SPEC_KEYWORDS = _INT_FIELDS + _STRING_FIELDS + (
    "restart_policy",
    "labels",
    "command",
    "env",
    "model",
    "steps",
    "batch_size",
    "checkpoint_every",
    "image",
    "mounts",
    "shm_size",
    "workdir",
    "use_mpirun",
    "after",
    "array",
    "gpu_share",
    "gpu_memory",
)

# shm_size: "8Gi" (Ki Mi Gi Ti binary; k K M G T decimal) or a number of bytes, as ringctl.
_SIZE_UNITS = (("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30), ("Ti", 1 << 40), ("k", 10**3),
               ("K", 10**3), ("M", 10**6), ("G", 10**9), ("T", 10**12))

_RESTART = {
    "never": job_pb2.RESTART_POLICY_NEVER,
    "onfailure": job_pb2.RESTART_POLICY_ON_FAILURE,
}

SpecLike = Union[Mapping[str, Any], str, "os.PathLike[str]", job_pb2.JobSpec, None]


class _Walker:
    """Reads one dict into a JobSpec; ``source`` and the key path prefix every error."""

    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, path: str, what: str) -> InvalidSpec:
        parts = [p for p in (self.source, path) if p]
        return InvalidSpec(": ".join(parts + [what]))

    def mapping(self, value: Any, path: str, known: Sequence[str] = ()) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.error(path, f"expected a mapping, got {_describe(value)}")
        for key in value:
            key_path = f"{path}.{key}" if path else str(key)
            if not isinstance(key, str):
                raise self.error(path, f"keys must be strings, got {_describe(key)}")
            if known and key not in known:
                raise self.error(key_path, f"unknown key (expected one of: {', '.join(known)})")
        return value

    def string(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise self.error(path, f"expected a string, got {_describe(value)}")
        return value

    def integer(self, value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(path, f"expected an integer, got {_describe(value)}")
        return value

    def string_map(self, value: Any, path: str) -> Dict[str, str]:
        self.mapping(value, path)
        return {k: self.string(v, f"{path}.{k}") for k, v in value.items()}

    def argv(self, value: Any, path: str) -> list:
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise self.error(path, f"expected a list of strings, got {_describe(value)}")
        return [self.string(a, f"{path}[{i}]") for i, a in enumerate(value)]

    def after(self, value: Any, path: str) -> list:
        """after: ["j-...:succeeded", "j-..."] (no condition: succeeded), as ringctl's --after."""
        out = []
        for i, text in enumerate(self.argv(value, path)):
            job, _, condition = text.rpartition(":") if ":" in text else (text, "", "succeeded")
            kind = _CONDITIONS.get(condition)
            if not job or kind is None:
                raise self.error(f"{path}[{i}]", "expected JOB[:succeeded|ended|failed], "
                                                 f'got "{text}"')
            out.append(job_pb2.JobDependency(job_id=job, condition=kind))
        return out

    def array(self, value: Any, path: str) -> job_pb2.JobArray:
        """{"count": 1000, "parallelism": 50}, or as ringctl's --array: "0-999%50", "1000", 1000
        (N tasks 0..N-1, or 0-M for M+1 tasks; %P: at most P at once, 1..count)."""
        if isinstance(value, job_pb2.JobArray):
            return job_pb2.JobArray(count=value.count, parallelism=value.parallelism)
        if isinstance(value, Mapping):
            array = job_pb2.JobArray()
            for k, v in self.mapping(value, path, _ARRAY_KEYS).items():
                self.set_int(array, k, v, f"{path}.{k}")
            return array
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise self.error(path, 'expected {"count": N, "parallelism": P} or a range such as '
                                   f'"0-999%50", got {_describe(value)}')
        return self._array_text(value, path)

    def _array_text(self, text: str, path: str) -> job_pb2.JobArray:
        """Slurm's form, checked as ringctl's ParseArraySpec (cli/job_spec.cc) checks it, with
        the same words."""

        def digits(part: str) -> "int | None":
            return int(part) if part.isascii() and part.isdigit() else None

        malformed = self.error(path, "expected N (tasks 0..N-1) or 0-M (tasks 0..M), optionally "
                                     "followed by %P (at most P at once), e.g. 0-999%50; "
                                     f'got "{text}"')
        span, percent, limit = text.partition("%")
        if "-" in span:
            first_text, _, last_text = span.partition("-")
            first, last = digits(first_text), digits(last_text)
            if first is None or last is None:
                raise malformed
            if first != 0:
                raise self.error(path, "a range starts at 0 (tasks are numbered 0..count-1), "
                                       f'e.g. 0-{last_text}; got "{text}"')
            count = last + 1
        else:
            n = digits(span)
            if n is None:
                raise malformed
            count = n
        if not 1 <= count <= MAX_ARRAY_TASKS:
            raise self.error(path, f"an array has 1..{MAX_ARRAY_TASKS} tasks, got {count} "
                                   f'("{text}")')
        array = job_pb2.JobArray(count=count)
        if percent:
            parallelism = digits(limit)
            if parallelism is None:
                raise malformed
            if not 1 <= parallelism <= count:
                tasks = "task" if count == 1 else "tasks"
                raise self.error(path, f"%P (tasks at once) must be 1..{count} for {count} "
                                       f'{tasks}, got "{text}"')
            array.parallelism = parallelism
        return array

    def restart_policy(self, value: Any, path: str) -> int:
        text = self.string(value, path)
        policy = _RESTART.get(text.replace("_", "").replace("-", "").lower())
        if policy is None:
            raise self.error(path, f'expected Never or OnFailure, got "{text}"')
        return policy

    def byte_size(self, value: Any, path: str) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str):
            text, factor = value.strip(), 1
            for suffix, unit in _SIZE_UNITS:
                if text.endswith(suffix):
                    text, factor = text[: -len(suffix)], unit
                    break
            if not text.isdigit() or not text.isascii():
                raise self.error(path, "expected a size such as 8Gi, 512Mi, 1G or a number of "
                                       f"bytes, got {_describe(value)}")
            number = int(text) * factor
        else:
            raise self.error(path, "expected a size such as 8Gi, 512Mi, 1G or a number of "
                                   f"bytes, got {_describe(value)}")
        if number < 0 or number >= 1 << 63:
            raise self.error(path, f"{number} is out of range")
        return number

    def mounts(self, value: Any, path: str) -> list:
        """[{volume, path, read_only}, ...] or "VOL:PATH[:ro|:rw]" strings, as ringctl's --mount."""
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise self.error(path, f"expected a list, got {_describe(value)}")
        out = []
        for i, item in enumerate(value):
            item_path = f"{path}[{i}]"
            mount = job_pb2.Mount()
            if isinstance(item, str):
                volume, sep, rest = item.partition(":")
                read_only = rest.endswith(":ro")
                if rest.endswith(":ro") or rest.endswith(":rw"):
                    rest = rest[:-3]
                if not volume or not sep or not rest:
                    raise self.error(item_path, f'expected VOLUME:PATH[:ro|:rw], got "{item}"')
                mount.volume, mount.path, mount.read_only = volume, rest, read_only
            else:
                for k, v in self.mapping(item, item_path, _MOUNT_KEYS).items():
                    if k == "read_only":
                        if not isinstance(v, bool):
                            raise self.error(f"{item_path}.read_only",
                                             f"expected true or false, got {_describe(v)}")
                        mount.read_only = v
                    else:
                        setattr(mount, k, self.string(v, f"{item_path}.{k}"))
            out.append(mount)
        return out

    def gpu_share(self, value: Any, path: str) -> int:
        """A fraction of one GPU in (0, 1], at most 3 decimals (0.25, "0.25") -> thousandths."""
        text = str(value).strip() if isinstance(value, (int, float, str)) and \
            not isinstance(value, bool) else None
        whole, _, decimals = (text or "").partition(".")
        ok = (text is not None and len(whole) <= 1 and len(decimals) <= 3 and
              (whole or decimals) and (whole + decimals).isdigit() and
              (whole + decimals).isascii())
        thousandths = int(whole or "0") * 1000 + int((decimals + "000")[:3]) if ok else 0
        if not 1 <= thousandths <= 1000:
            raise self.error(path, "expected a fraction of one GPU in (0, 1] with at most 3 "
                                   f"decimals, such as 0.25, got {_describe(value)}")
        return thousandths

    def set_int(self, message: Any, field: str, value: Any, path: str) -> None:
        number = self.integer(value, path)
        try:
            setattr(message, field, number)
        except ValueError:
            raise self.error(path, f"{number} is out of range") from None

    def spec(self, data: Any) -> job_pb2.JobSpec:
        self.mapping(data, "", _TOP_KEYS)
        if "trainer" in data and "command" in data:
            raise self.error("", "give one workload, trainer or command, not both")
        spec = job_pb2.JobSpec()
        for key, value in data.items():
            if key in _STRING_FIELDS:
                setattr(spec, key, self.string(value, key))
            elif key in _INT_FIELDS:
                self.set_int(spec, key, value, key)
            elif key == "restart_policy":
                spec.restart_policy = self.restart_policy(value, key)
            elif key == "labels":
                spec.labels.update(self.string_map(value, key))
            elif key == "progress_timeout_seconds":
                # Optional: set (0 turns hang detection off) or absent (the queue's default).
                self.set_int(spec, key, value, key)
            elif key in ("health_check", "use_mpirun"):
                if not isinstance(value, bool):
                    raise self.error(key, f"expected true or false, got {_describe(value)}")
                setattr(spec, key, value)
            elif key in ("image", "workdir"):
                setattr(spec, key, self.string(value, key))
            elif key == "mounts":
                spec.mounts.extend(self.mounts(value, key))
            elif key == "after":
                spec.after.extend(self.after(value, key))
            elif key == "array":
                spec.array.CopyFrom(self.array(value, key))
            elif key == "shm_size":
                spec.shm_size_bytes = self.byte_size(value, key)
            elif key == "gpu_share":
                spec.gpu_share = self.gpu_share(value, key)
            elif key == "gpu_memory":
                spec.gpu_memory = self.byte_size(value, key)
            elif key == "trainer":
                trainer = spec.trainer
                trainer.SetInParent()
                for k, v in self.mapping(value if value is not None else {}, key,
                                         _TRAINER_KEYS).items():
                    if k == "model":
                        trainer.model = self.string(v, "trainer.model")
                    else:
                        self.set_int(trainer, k, v, f"trainer.{k}")
            elif key == "command":
                command = spec.command
                command.SetInParent()
                for k, v in self.mapping(value, key, _COMMAND_KEYS).items():
                    if k == "argv":
                        command.argv.extend(self.argv(v, "command.argv"))
                    elif k == "check_in_mpi_init":
                        if not isinstance(v, bool):
                            raise self.error("command.check_in_mpi_init",
                                             f"expected true or false, got {_describe(v)}")
                        command.check_in_mpi_init = v
                    else:
                        command.env.update(self.string_map(v, "command.env"))
        return spec


def _describe(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def spec_from_dict(data: Mapping[str, Any], source: str = "") -> job_pb2.JobSpec:
    """Reads a spec in its dict (YAML) form. Raises :class:`InvalidSpec` naming the key."""
    return _Walker(source).spec(data)


def load_spec_file(path: "str | os.PathLike[str]") -> job_pb2.JobSpec:
    """Reads a YAML spec file (the format of docs/examples/job.yaml)."""
    import yaml  # Debian's python3-yaml; only needed for files.

    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as f:
            documents = list(yaml.safe_load_all(f))
    except OSError as e:
        raise InvalidSpec(f"{source}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise InvalidSpec(f"{source}: not valid YAML: {e}".replace("\n", " ")) from None
    if len(documents) != 1:
        raise InvalidSpec(f"{source}: expected one YAML document, got {len(documents)}")
    return _Walker(source).spec(documents[0])


def build_spec(spec: SpecLike, overrides: Mapping[str, Any]) -> job_pb2.JobSpec:
    """The spec ``Client.submit`` sends: ``spec`` (a dict, a YAML file path, a JobSpec, or None)
    with the keyword ``overrides`` applied on top, as ``ringctl submit -f FILE --flag ...``
    does. A spec from keywords alone, without ``command``, runs the built-in trainer."""
    unknown = sorted(set(overrides) - set(SPEC_KEYWORDS))
    if unknown:
        raise TypeError(
            f"submit() got unexpected keyword argument(s) {', '.join(unknown)}; "
            f"spec fields are: {', '.join(SPEC_KEYWORDS)}"
        )
    if spec is None:
        message = job_pb2.JobSpec()
    elif isinstance(spec, job_pb2.JobSpec):
        message = job_pb2.JobSpec()
        message.CopyFrom(spec)
    elif isinstance(spec, Mapping):
        message = spec_from_dict(spec)
    elif isinstance(spec, (str, os.PathLike)):
        message = load_spec_file(spec)
    else:
        raise TypeError(
            "spec must be a dict, a path to a YAML file or a ringmaster.v1.JobSpec, "
            f"got {type(spec).__name__}"
        )

    w = _Walker("")
    o = dict(overrides)
    if isinstance(o.get("replicas"), str) and ":" in o["replicas"]:
        # "MIN:MAX", as ringctl's --replicas: an elastic job asking for MAX ranks.
        low, _, high = o["replicas"].partition(":")
        try:
            o["min_replicas"], o["max_replicas"] = int(low), int(high)
        except ValueError:
            raise InvalidSpec(f"replicas: must be N or MIN:MAX, got {o['replicas']!r}") from None
        o["replicas"] = o["max_replicas"]
    if spec is None and o.get("replicas") is None:
        # One rank unless told otherwise, as ringctl submits from flags alone.
        message.replicas = 1
    for key in _STRING_FIELDS:
        if o.get(key) is not None:
            setattr(message, key, w.string(o[key], key))
    for key in _INT_FIELDS:
        if o.get(key) is not None:
            w.set_int(message, key, o[key], key)
    if o.get("restart_policy") is not None:
        message.restart_policy = w.restart_policy(o["restart_policy"], "restart_policy")
    if o.get("labels") is not None:
        message.labels.update(w.string_map(o["labels"], "labels"))
    for key in ("image", "workdir"):
        if o.get(key) is not None:
            setattr(message, key, w.string(o[key], key))
    if o.get("mounts") is not None:
        # Replaces the file's list, as ringctl's --mount does.
        del message.mounts[:]
        message.mounts.extend(w.mounts(o["mounts"], "mounts"))
    if o.get("shm_size") is not None:
        message.shm_size_bytes = w.byte_size(o["shm_size"], "shm_size")
    if o.get("gpu_share") is not None:
        message.gpu_share = w.gpu_share(o["gpu_share"], "gpu_share")
        # A share is of one GPU, as ringctl's --gpu-share: one per rank unless given.
        if o.get("gpus_per_replica") is None and not message.gpus_per_replica:
            message.gpus_per_replica = 1
    if o.get("gpu_memory") is not None:
        message.gpu_memory = w.byte_size(o["gpu_memory"], "gpu_memory")
    if o.get("after") is not None:
        # Replaces the spec's list, as ringctl's --after does.
        del message.after[:]
        message.after.extend(w.after(o["after"], "after"))
    if o.get("array") is not None:
        message.array.CopyFrom(w.array(o["array"], "array"))
    if o.get("use_mpirun") is not None:
        if not isinstance(o["use_mpirun"], bool):
            raise w.error("use_mpirun", f"expected true or false, got {_describe(o['use_mpirun'])}")
        message.use_mpirun = o["use_mpirun"]

    trainer_fields = {k: o[k] for k in _TRAINER_KEYS if o.get(k) is not None}
    if o.get("command") is not None:
        if trainer_fields:
            raise InvalidSpec(
                "model, steps, batch_size and checkpoint_every configure the built-in trainer; "
                "they cannot be combined with command"
            )
        argv = w.argv(o["command"], "command")
        env = dict(message.command.env) if message.HasField("command") else {}
        message.command.Clear()
        message.command.argv.extend(argv)
        message.command.env.update(env)
    if o.get("env") is not None:
        if message.HasField("trainer") or not message.HasField("command"):
            raise InvalidSpec("env: sets a command's environment, but the job has no command")
        message.command.env.update(w.string_map(o["env"], "env"))
    if trainer_fields:
        if message.HasField("command"):
            raise InvalidSpec(
                "model, steps, batch_size and checkpoint_every configure the built-in trainer, "
                "but the job spec has a command workload"
            )
        message.trainer.SetInParent()
        if "model" in trainer_fields:
            message.trainer.model = w.string(trainer_fields["model"], "model")
        for key in ("steps", "batch_size", "checkpoint_every"):
            if key in trainer_fields:
                w.set_int(message.trainer, key, trainer_fields[key], key)
    if spec is None and message.WhichOneof("workload") is None:
        message.trainer.SetInParent()
    return message


def spec_to_dict(spec: job_pb2.JobSpec) -> Dict[str, Any]:
    """The dict (YAML) form of a JobSpec; ``spec_from_dict(spec_to_dict(s)) == s``."""
    out: Dict[str, Any] = {"name": spec.name, "replicas": spec.replicas}
    if spec.min_replicas or spec.max_replicas:
        out["min_replicas"] = spec.min_replicas
        out["max_replicas"] = spec.max_replicas
    if spec.sizes_divide:
        out["sizes_divide"] = spec.sizes_divide
    if spec.queue:
        out["queue"] = spec.queue
    if spec.priority:
        out["priority"] = spec.priority
    if spec.gpus_per_replica:
        out["gpus_per_replica"] = spec.gpus_per_replica
    if spec.gpu_type:
        out["gpu_type"] = spec.gpu_type
    if spec.gpu_share:
        out["gpu_share"] = f"{spec.gpu_share // 1000}.{spec.gpu_share % 1000:03d}".rstrip("0") \
            .rstrip(".")
    if spec.gpu_memory:
        out["gpu_memory"] = spec.gpu_memory
    if spec.restart_policy == job_pb2.RESTART_POLICY_NEVER:
        out["restart_policy"] = "Never"
    elif spec.restart_policy == job_pb2.RESTART_POLICY_ON_FAILURE:
        out["restart_policy"] = "OnFailure"
    if spec.HasField("backoff_limit"):
        out["backoff_limit"] = spec.backoff_limit
    if spec.max_runtime_seconds:
        out["max_runtime_seconds"] = spec.max_runtime_seconds
    if spec.HasField("progress_timeout_seconds"):
        out["progress_timeout_seconds"] = spec.progress_timeout_seconds
    if spec.labels:
        out["labels"] = dict(spec.labels)
    if spec.HasField("health_check"):
        out["health_check"] = spec.health_check
    if spec.use_mpirun:
        out["use_mpirun"] = True
    if spec.after:
        out["after"] = [f"{d.job_id}:{_CONDITION_NAMES.get(d.condition, 'succeeded')}"
                        for d in spec.after]
    if spec.HasField("array"):
        out["array"] = {"count": spec.array.count, "parallelism": spec.array.parallelism}
    if spec.image:
        out["image"] = spec.image
    if spec.mounts:
        out["mounts"] = [{"volume": m.volume, "path": m.path, "read_only": m.read_only}
                         for m in spec.mounts]
    if spec.shm_size_bytes:
        out["shm_size"] = spec.shm_size_bytes
    if spec.workdir:
        out["workdir"] = spec.workdir
    workload = spec.WhichOneof("workload")
    if workload == "trainer":
        trainer: Dict[str, Any] = {}
        if spec.trainer.model:
            trainer["model"] = spec.trainer.model
        if spec.trainer.batch_size:
            trainer["batch_size"] = spec.trainer.batch_size
        if spec.trainer.steps:
            trainer["steps"] = spec.trainer.steps
        if spec.trainer.HasField("checkpoint_every"):
            trainer["checkpoint_every"] = spec.trainer.checkpoint_every
        out["trainer"] = trainer
    elif workload == "command":
        command: Dict[str, Any] = {"argv": list(spec.command.argv)}
        if spec.command.env:
            command["env"] = dict(spec.command.env)
        if spec.command.check_in_mpi_init:
            command["check_in_mpi_init"] = True
        out["command"] = command
    return out
