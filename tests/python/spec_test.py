"""The Python client without a server: specs from dicts, files and keywords; errors; states.

    PYTHONPATH=python:build/python python3 -m unittest -v tests/python/spec_test.py
"""

import datetime
import os
import pydoc
import tempfile
import unittest

import grpc

import ringmaster
from ringmaster import JobState, errors
from ringmaster.spec import build_spec, load_spec_file, spec_from_dict, spec_to_dict
from ringmaster.v1 import agent_pb2, job_pb2

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


class SpecTest(unittest.TestCase):
    def test_example_file_round_trips_through_its_dict_form(self):
        spec = load_spec_file(os.path.join(REPO, "docs", "examples", "job.yaml"))
        self.assertEqual(spec.replicas, 4)
        self.assertEqual(spec.restart_policy, job_pb2.RESTART_POLICY_ON_FAILURE)
        self.assertEqual(spec.trainer.steps, 1000)
        self.assertEqual(spec_from_dict(spec_to_dict(spec)), spec)

    def test_elastic_range_from_keywords_and_dicts(self):
        spec = build_spec(None, {"replicas": "2:8", "command": ["hostname"]})
        self.assertEqual((spec.min_replicas, spec.replicas, spec.max_replicas), (2, 8, 8))
        data = {"name": "e", "replicas": 4, "min_replicas": 2, "max_replicas": 8,
                "command": {"argv": ["hostname"]}}
        spec = spec_from_dict(data)
        self.assertEqual((spec.min_replicas, spec.replicas, spec.max_replicas), (2, 4, 8))
        self.assertEqual(spec_from_dict(spec_to_dict(spec)), spec)
        self.assertNotIn("min_replicas", spec_to_dict(spec_from_dict({"name": "r", "replicas": 2})))
        with self.assertRaisesRegex(errors.InvalidSpec, "replicas: must be N or MIN:MAX"):
            build_spec(None, {"replicas": "2:x"})

    def test_sizes_divide_from_keywords_and_dicts(self):
        spec = build_spec(None, {"replicas": "2:8", "sizes_divide": 256, "command": ["hostname"]})
        self.assertEqual((spec.min_replicas, spec.replicas, spec.max_replicas), (2, 8, 8))
        self.assertEqual(spec.sizes_divide, 256)
        data = {"name": "e", "replicas": 4, "min_replicas": 2, "max_replicas": 8,
                "sizes_divide": 96, "command": {"argv": ["hostname"]}}
        spec = spec_from_dict(data)
        self.assertEqual(spec.sizes_divide, 96)
        self.assertEqual(spec_to_dict(spec)["sizes_divide"], 96)
        self.assertEqual(spec_from_dict(spec_to_dict(spec)), spec)
        self.assertNotIn("sizes_divide", spec_to_dict(spec_from_dict({"name": "r", "replicas": 2})))
        with self.assertRaisesRegex(errors.InvalidSpec, 'sizes_divide: expected an integer'):
            build_spec(None, {"replicas": "2:8", "sizes_divide": "256"})

    def test_gpu_shares_parse_round_trip_and_name_their_key(self):
        spec = build_spec(None, {"gpu_share": 0.25, "gpu_memory": "10Gi", "command": ["true"]})
        self.assertEqual((spec.gpu_share, spec.gpu_memory, spec.gpus_per_replica),
                         (250, 10 << 30, 1))
        data = {"name": "eval", "replicas": 2, "gpus_per_replica": 1, "gpu_share": "0.125",
                "gpu_memory": 1 << 30, "command": {"argv": ["true"]}}
        spec = spec_from_dict(data)
        self.assertEqual(spec.gpu_share, 125)
        self.assertEqual(spec_to_dict(spec)["gpu_share"], "0.125")
        self.assertEqual(spec_from_dict(spec_to_dict(spec)), spec)
        self.assertEqual(spec_to_dict(build_spec(None, {"gpu_share": "1"}))["gpu_share"], "1")
        for value in (0, "0", 1.5, "0.0005", "a", True, "-0.25", ".", "1.001"):
            with self.assertRaises(errors.InvalidSpec) as raised:
                spec_from_dict({"name": "x", "gpu_share": value})
            self.assertIn("gpu_share: expected a fraction of one GPU", str(raised.exception))

    def test_environment_keys_round_trip_and_keywords_replace_mounts(self):
        data = {"name": "torch", "replicas": 2, "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "mounts": [{"volume": "imagenet", "path": "/data", "read_only": True},
                           "scratch:/scratch:rw"],
                "shm_size": "8Gi", "workdir": "/workspace",
                "command": {"argv": ["torchrun", "train.py"]}}
        spec = spec_from_dict(data)
        self.assertEqual(spec.image, "nvcr.io/nvidia/pytorch:24.05-py3")
        self.assertEqual([(m.volume, m.path, m.read_only) for m in spec.mounts],
                         [("imagenet", "/data", True), ("scratch", "/scratch", False)])
        self.assertEqual(spec.shm_size_bytes, 8 << 30)
        self.assertEqual(spec.workdir, "/workspace")
        self.assertEqual(spec_from_dict(spec_to_dict(spec)), spec)

        built = build_spec(data, {"mounts": ["logs:/logs:ro"], "shm_size": 1048576,
                                  "image": "train:v2", "workdir": "/w"})
        self.assertEqual([(m.volume, m.path, m.read_only) for m in built.mounts],
                         [("logs", "/logs", True)])
        self.assertEqual(built.shm_size_bytes, 1048576)
        self.assertEqual(built.image, "train:v2")
        self.assertEqual(built.workdir, "/w")

    def test_bad_environment_values_name_their_key(self):
        for data, where in [({"shm_size": "eight"}, "shm_size: expected a size"),
                            ({"shm_size": -1}, "shm_size: -1 is out of range"),
                            ({"mounts": "imagenet:/data"}, "mounts: expected a list"),
                            ({"mounts": ["imagenet"]}, "mounts[0]: expected VOLUME:PATH"),
                            ({"mounts": [{"volume": "a", "size": 1}]}, "mounts[0].size: unknown"),
                            ({"mounts": [{"volume": "a", "read_only": "yes"}]},
                             "mounts[0].read_only: expected true or false")]:
            with self.assertRaises(errors.InvalidSpec) as raised:
                spec_from_dict(dict(data, name="x"))
            self.assertIn(where, str(raised.exception))

    def test_health_check_opts_out_and_round_trips(self):
        spec = spec_from_dict({"name": "x", "replicas": 2, "health_check": False,
                               "command": {"argv": ["true"]}})
        self.assertTrue(spec.HasField("health_check"))
        self.assertFalse(spec.health_check)
        self.assertEqual(spec_from_dict(spec_to_dict(spec)), spec)
        self.assertNotIn("health_check", spec_to_dict(spec_from_dict({"name": "x"})))
        with self.assertRaisesRegex(errors.InvalidSpec, "health_check: expected true or false"):
            spec_from_dict({"name": "x", "health_check": "no"})

    def test_after_and_use_mpirun_round_trip_and_name_what_is_wrong(self):
        spec = spec_from_dict({"name": "x", "use_mpirun": True,
                               "after": ["j-0123456789ab:failed", "j-0123456789ac"]})
        self.assertTrue(spec.use_mpirun)
        self.assertEqual([(d.job_id, d.condition) for d in spec.after],
                         [("j-0123456789ab", job_pb2.DEPENDENCY_CONDITION_FAILED),
                          ("j-0123456789ac", job_pb2.DEPENDENCY_CONDITION_SUCCEEDED)])
        self.assertEqual(spec_from_dict(spec_to_dict(spec)), spec)
        built = build_spec({"name": "x", "after": ["j-1"]}, {"after": ["j-2:ended"]})
        self.assertEqual([d.job_id for d in built.after], ["j-2"])
        with self.assertRaisesRegex(errors.InvalidSpec,
                                    r"after\[0\]: expected JOB\[:succeeded\|ended\|failed\]"):
            spec_from_dict({"name": "x", "after": ["j-1:afterok"]})
        with self.assertRaisesRegex(errors.InvalidSpec, "use_mpirun: expected true or false"):
            build_spec(None, {"use_mpirun": "yes"})

    def test_array_takes_slurms_form_or_a_dict_and_round_trips(self):
        for value, count, parallelism in [("0-999%50", 1000, 50), ("10", 10, 0), (10, 10, 0),
                                          ("0-9%2", 10, 2), ("0-0", 1, 0), ("100000", 100000, 0),
                                          ("0-9%10", 10, 10),
                                          ({"count": 1000, "parallelism": 50}, 1000, 50),
                                          ({"count": 7}, 7, 0)]:
            with self.subTest(value=value):
                spec = spec_from_dict({"name": "x", "array": value,
                                       "command": {"argv": ["./task", "{index}"]}})
                self.assertEqual((spec.array.count, spec.array.parallelism), (count, parallelism))
                self.assertEqual(spec_from_dict(spec_to_dict(spec)), spec)
        self.assertNotIn("array", spec_to_dict(spec_from_dict({"name": "x"})))
        built = build_spec({"name": "x", "array": "0-9", "command": {"argv": ["t"]}},
                           {"array": "0-99%5"})
        self.assertEqual((built.array.count, built.array.parallelism), (100, 5))
        keyword = build_spec(None, {"command": ["./task"], "array": {"count": 3}})
        self.assertEqual(keyword.array.count, 3)
        self.assertFalse(build_spec(None, {"command": ["./task"]}).HasField("array"))

    def test_array_errors_say_what_is_allowed_as_ringctl_does(self):
        shape = ('array: expected N (tasks 0..N-1) or 0-M (tasks 0..M), optionally followed by '
                 '%P (at most P at once), e.g. 0-999%50; got ')
        cases = [
            ("5-10", 'array: a range starts at 0 (tasks are numbered 0..count-1), e.g. 0-10; '
                     'got "5-10"'),
            ("0", 'array: an array has 1..100000 tasks, got 0 ("0")'),
            ("0-100000", 'array: an array has 1..100000 tasks, got 100001 ("0-100000")'),
            ("0-9%0", 'array: %P (tasks at once) must be 1..10 for 10 tasks, got "0-9%0"'),
            ("0-9%11", 'array: %P (tasks at once) must be 1..10 for 10 tasks, got "0-9%11"'),
            ("ten", shape + '"ten"'),
            ("0-9%", shape + '"0-9%"'),
            ("-5", shape + '"-5"'),
            ("+5", shape + '"+5"'),
            (" 5", shape + '" 5"'),
            ("0-9-3", shape + '"0-9-3"'),
            ("0:9", shape + '"0:9"'),
            (["0-9"], 'array: expected {"count": N, "parallelism": P} or a range such as '
                      '"0-999%50", got a list'),
            (True, 'array: expected {"count": N, "parallelism": P} or a range such as '
                   '"0-999%50", got a boolean (True)'),
            ({"count": 10, "limit": 2},
             "array.limit: unknown key (expected one of: count, parallelism)"),
            ({"count": "ten"}, 'array.count: expected an integer, got "ten"'),
        ]
        for value, message in cases:
            with self.subTest(value=value):
                with self.assertRaises(errors.InvalidSpec) as cm:
                    spec_from_dict({"array": value})
                self.assertEqual(str(cm.exception), message)
                with self.assertRaises(errors.InvalidSpec) as cm:
                    build_spec(None, {"command": ["t"], "array": value})
                self.assertEqual(str(cm.exception), message)

    def test_check_in_mpi_init_round_trips_and_must_be_a_bool(self):
        spec = spec_from_dict({"name": "x", "command": {"argv": ["./mpi-app"],
                                                        "check_in_mpi_init": True}})
        self.assertTrue(spec.command.check_in_mpi_init)
        self.assertEqual(spec_to_dict(spec)["command"]["check_in_mpi_init"], True)
        self.assertNotIn("check_in_mpi_init",
                         spec_to_dict(spec_from_dict({"command": {"argv": ["x"]}}))["command"])
        with self.assertRaisesRegex(errors.InvalidSpec,
                                    "command.check_in_mpi_init: expected true or false"):
            spec_from_dict({"command": {"argv": ["x"], "check_in_mpi_init": "yes"}})

    def test_progress_timeout_is_optional_and_round_trips(self):
        spec = spec_from_dict({"name": "x", "progress_timeout_seconds": 0,
                               "command": {"argv": ["true"]}})
        self.assertTrue(spec.HasField("progress_timeout_seconds"))
        self.assertEqual(spec.progress_timeout_seconds, 0)
        self.assertEqual(spec_from_dict(spec_to_dict(spec)), spec)
        self.assertNotIn("progress_timeout_seconds", spec_to_dict(spec_from_dict({"name": "x"})))
        with self.assertRaisesRegex(errors.InvalidSpec, "progress_timeout_seconds: expected an"):
            spec_from_dict({"name": "x", "progress_timeout_seconds": "soon"})

    def test_checkpoint_every_is_optional_and_round_trips(self):
        spec = spec_from_dict({"name": "x", "trainer": {"checkpoint_every": 0}})
        self.assertTrue(spec.trainer.HasField("checkpoint_every"))
        self.assertEqual(spec_from_dict(spec_to_dict(spec)), spec)
        unset = spec_to_dict(spec_from_dict({"name": "x", "trainer": {}}))
        self.assertNotIn("checkpoint_every", unset["trainer"])
        keyword = build_spec(None, {"name": "x", "checkpoint_every": 25})
        self.assertEqual(keyword.trainer.checkpoint_every, 25)
        with self.assertRaisesRegex(errors.InvalidSpec, "trainer.checkpoint_every: expected an"):
            spec_from_dict({"name": "x", "trainer": {"checkpoint_every": "often"}})

    def test_keywords_alone_run_the_built_in_trainer(self):
        spec = build_spec(None, {"name": "smoke", "replicas": 2, "steps": 10})
        self.assertEqual(spec.WhichOneof("workload"), "trainer")
        self.assertEqual(spec.trainer.steps, 10)
        self.assertEqual(build_spec(None, {"name": "x"}).WhichOneof("workload"), "trainer")

    def test_a_dict_without_workload_is_left_for_the_scheduler_to_reject(self):
        self.assertIsNone(build_spec({"name": "x"}, {}).WhichOneof("workload"))

    def test_keywords_alone_have_one_replica_unless_told(self):
        self.assertEqual(build_spec(None, {"name": "x", "command": ["true"]}).replicas, 1)
        self.assertEqual(build_spec(None, {"name": "x", "replicas": 3}).replicas, 3)
        # A dict is sent as it is; the scheduler names the missing field.
        self.assertEqual(build_spec({"name": "x", "command": {"argv": ["true"]}}, {}).replicas, 0)

    def test_keywords_override_the_dict_and_merge_labels(self):
        base = {"name": "a", "replicas": 4, "labels": {"team": "vision", "run": "1"},
                "command": {"argv": ["old"], "env": {"A": "1"}}}
        spec = build_spec(base, {"replicas": 8, "labels": {"run": "2"},
                                 "command": ["python3", "train.py"], "env": {"B": "2"},
                                 "restart_policy": "on_failure", "backoff_limit": 0})
        self.assertEqual(spec.replicas, 8)
        self.assertEqual(dict(spec.labels), {"team": "vision", "run": "2"})
        self.assertEqual(list(spec.command.argv), ["python3", "train.py"])
        self.assertEqual(dict(spec.command.env), {"A": "1", "B": "2"})
        self.assertEqual(spec.restart_policy, job_pb2.RESTART_POLICY_ON_FAILURE)
        self.assertTrue(spec.HasField("backoff_limit"))
        self.assertEqual(base["replicas"], 4, "the caller's dict is not changed")

    def test_structural_errors_name_the_key(self):
        cases = [
            ({"name": "x", "replicas": "two"}, 'replicas: expected an integer, got "two"'),
            ({"name": "x", "replicas": True},
             "replicas: expected an integer, got a boolean (True)"),
            ({"name": "x", "replica": 1}, "replica: unknown key (expected one of: name, queue, "
             "priority, replicas, min_replicas, max_replicas, sizes_divide, gpus_per_replica, "
             "gpu_type, "
             "gpu_share, gpu_memory, restart_policy, backoff_limit, "
             "max_runtime_seconds, progress_timeout_seconds, labels, health_check, use_mpirun, "
             "after, array, trainer, command, image, mounts, shm_size, workdir)"),
            ({"trainer": {"stepz": 1}}, "trainer.stepz: unknown key (expected one of: model, "
             "batch_size, steps, checkpoint_every)"),
            ({"command": {"argv": "hostname"}}, 'command.argv: expected a list of strings, got '
             '"hostname"'),
            ({"command": {"argv": ["a", 1]}}, "command.argv[1]: expected a string, got int 1"),
            ({"labels": {"a": 1}}, "labels.a: expected a string, got int 1"),
            ({"restart_policy": "Always"}, 'restart_policy: expected Never or OnFailure, got '
             '"Always"'),
            ({"trainer": {}, "command": {"argv": ["x"]}},
             "give one workload, trainer or command, not both"),
            ({"replicas": 2**40}, f"replicas: {2**40} is out of range"),
        ]
        for data, message in cases:
            with self.subTest(data=data):
                with self.assertRaises(errors.InvalidSpec) as cm:
                    spec_from_dict(data)
                self.assertEqual(str(cm.exception), message)
                self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)

    def test_trainer_keywords_do_not_mix_with_a_command(self):
        with self.assertRaises(errors.InvalidSpec):
            build_spec(None, {"command": ["x"], "steps": 3})
        with self.assertRaises(errors.InvalidSpec):
            build_spec({"command": {"argv": ["x"]}}, {"model": "mlp"})
        with self.assertRaises(errors.InvalidSpec):
            build_spec(None, {"env": {"A": "1"}})

    def test_unknown_keyword_is_a_type_error_listing_the_fields(self):
        with self.assertRaises(TypeError) as cm:
            build_spec(None, {"replica": 2})
        self.assertIn("replica", str(cm.exception))
        self.assertIn("gpus_per_replica", str(cm.exception))

    def test_file_errors_name_the_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("name: x\ntrainer:\n  steps: ten\n")
        try:
            with self.assertRaises(errors.InvalidSpec) as cm:
                load_spec_file(f.name)
            self.assertEqual(str(cm.exception), f'{f.name}: trainer.steps: expected an integer, '
                             'got "ten"')
        finally:
            os.unlink(f.name)
        with self.assertRaises(errors.InvalidSpec) as cm:
            load_spec_file("/nonexistent/job.yaml")
        self.assertIn("/nonexistent/job.yaml: No such file", str(cm.exception))


class ErrorsTest(unittest.TestCase):
    class FakeRpcError(grpc.RpcError):
        def __init__(self, code, details):
            self._code, self._details = code, details

        def code(self):
            return self._code

        def details(self):
            return self._details

    def test_each_code_has_its_class_and_keeps_the_servers_message(self):
        e = errors.from_rpc_error(self.FakeRpcError(grpc.StatusCode.NOT_FOUND, "job j-1 not found"))
        self.assertIsInstance(e, errors.NotFound)
        self.assertEqual(str(e), "job j-1 not found")
        self.assertEqual(e.code, grpc.StatusCode.NOT_FOUND)
        e = errors.from_rpc_error(
            self.FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT, "replicas: must be 1..4096, got 0"),
            spec_call=True)
        self.assertIsInstance(e, errors.InvalidSpec)
        e = errors.from_rpc_error(self.FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT, "page_token"))
        self.assertIs(type(e), errors.InvalidArgument)
        e = errors.from_rpc_error(self.FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, ""))
        self.assertIsInstance(e, TimeoutError)
        self.assertEqual(str(e), "DEADLINE_EXCEEDED")


class StateTest(unittest.TestCase):
    def test_states_parse_like_ringctl_and_compare_as_strings(self):
        self.assertIs(JobState.parse("running"), JobState.RUNNING)
        self.assertIs(JobState.parse("JOB_STATE_FAILED"), JobState.FAILED)
        self.assertEqual(JobState.SUCCEEDED, "SUCCEEDED")
        self.assertEqual(str(JobState.SUCCEEDED), "SUCCEEDED")
        self.assertTrue(JobState.CANCELLED.terminal)
        self.assertFalse(JobState.RUNNING.terminal)
        with self.assertRaises(ValueError):
            JobState.parse("done")
        for value in job_pb2.JobState.values():
            self.assertEqual(JobState.from_proto(value).to_proto(), value)


class ArrayTypesTest(unittest.TestCase):
    def test_an_array_shows_its_task_counts_and_a_task_its_array(self):
        proto = job_pb2.Job(id="j-3f9c2a41b7d0", state=job_pb2.JOB_STATE_RUNNING)
        proto.spec.name = "sweep"
        proto.spec.array.count = 1000
        proto.spec.array.parallelism = 50
        proto.array_status.CopyFrom(job_pb2.ArrayStatus(
            count=1000, waiting=900, pending=40, running=10, succeeded=48, failed=2,
            failed_indices=[4, 17]))
        array = ringmaster.Job.from_proto(proto)
        self.assertTrue(array.is_array)
        self.assertEqual(array.spec["array"], {"count": 1000, "parallelism": 50})
        self.assertEqual(array.array_status, ringmaster.ArrayStatus(
            count=1000, waiting=900, pending=40, running=10, succeeded=48, failed=2,
            cancelled=0, failed_indices=(4, 17)))
        self.assertEqual(array.array_status.ended, 50)
        self.assertEqual((array.array_id, array.array_index), ("", None))

        task = ringmaster.Job.from_proto(job_pb2.Job(
            id="j-3f9c2a41b7d0-0", array_id="j-3f9c2a41b7d0", array_index=0))
        self.assertFalse(task.is_array)
        self.assertIsNone(task.array_status)
        self.assertEqual((task.array_id, task.array_index), ("j-3f9c2a41b7d0", 0))


class ElasticTypesTest(unittest.TestCase):
    def test_an_elastic_job_shows_its_resizes_oldest_first(self):
        proto = job_pb2.Job(id="j-e", state=job_pb2.JOB_STATE_RUNNING, attempt=2)
        proto.spec.name = "stretch"
        proto.spec.replicas = 2
        proto.spec.min_replicas = 2
        proto.spec.max_replicas = 4
        proto.resizes.add(job_id="j-e", seq=4, state=job_pb2.JOB_STATE_PENDING, attempt=0,
                          reason="grown from 2 to 4 replicas: 2 x t4 idle in cohort c for 60 s",
                          time_ms=1_700_000_000_000)
        proto.resizes.add(job_id="j-e", seq=9, state=job_pb2.JOB_STATE_PENDING, attempt=1,
                          reason="shrunk from 4 to 2: queue b reclaims its nominal quota",
                          time_ms=1_700_000_060_000)
        job = ringmaster.Job.from_proto(proto)
        self.assertEqual(len(job.resizes), 2)
        grown, shrunk = job.resizes
        self.assertIsInstance(grown, ringmaster.JobEvent)
        self.assertEqual((grown.seq, grown.state, grown.attempt), (4, "PENDING", 0))
        self.assertTrue(grown.reason.startswith("grown from 2 to 4 replicas"))
        self.assertEqual(shrunk.reason, "shrunk from 4 to 2: queue b reclaims its nominal quota")
        self.assertEqual(shrunk.time - grown.time, datetime.timedelta(seconds=60))
        self.assertEqual((job.spec["min_replicas"], job.spec["max_replicas"]), (2, 4))
        self.assertNotIn("sizes_divide", job.spec)

    def test_an_elastic_jobs_sizes_divide_is_in_its_spec(self):
        proto = job_pb2.Job(id="j-d", state=job_pb2.JOB_STATE_RUNNING)
        proto.spec.name = "batch"
        proto.spec.replicas = 4
        proto.spec.min_replicas = 2
        proto.spec.max_replicas = 8
        proto.spec.sizes_divide = 256
        job = ringmaster.Job.from_proto(proto)
        self.assertEqual(job.spec["sizes_divide"], 256)

    def test_a_job_without_resizes_has_none(self):
        job = ringmaster.Job.from_proto(job_pb2.Job(id="j-p"))
        self.assertEqual(job.resizes, ())


class QueueCallsTest(unittest.TestCase):
    def test_a_queue_may_set_its_elastic_idle_delay_or_leave_the_schedulers(self):
        client = ringmaster.Client("127.0.0.1:1", tls=False, retry_seconds=0)
        self.addCleanup(client.close)
        requests = []
        client._call = lambda method, request, **_: requests.append(request)
        client.create_queue("team-a", cohort="lab", elastic_idle_delay_seconds=300)
        client.update_queue("team-a", cohort="lab")
        self.assertTrue(requests[0].queue.HasField("elastic_idle_delay_seconds"))
        self.assertEqual(requests[0].queue.elastic_idle_delay_seconds, 300)
        self.assertFalse(requests[1].queue.HasField("elastic_idle_delay_seconds"))


class ArrayCallsTest(unittest.TestCase):
    """list(array=) and logs(index=) without a server: the client's calls are replaced."""

    class FakeLogCall:
        def __init__(self, data):
            self.chunks = [agent_pb2.LogChunk(data=data)]

        def __iter__(self):
            return iter(self.chunks)

        def cancel(self):
            pass

    def setUp(self):
        self.client = ringmaster.Client("127.0.0.1:1", tls=False, retry_seconds=0)
        self.addCleanup(self.client.close)
        array = job_pb2.Job(id="j-a", state=job_pb2.JOB_STATE_RUNNING)
        array.spec.array.count = 10
        array.array_status.CopyFrom(job_pb2.ArrayStatus(count=10, waiting=3, running=7))
        plain = job_pb2.Job(id="j-p", state=job_pb2.JOB_STATE_RUNNING)
        self.jobs = {"j-a": array, "j-p": plain}
        self.requests = []

        def call(method, request, **_):
            self.requests.append(request)
            if isinstance(request, job_pb2.GetJobRequest):
                return self.jobs[request.job_id]
            return job_pb2.ListJobsResponse(jobs=[job_pb2.Job(id="j-a-9", array_id="j-a",
                                                              array_index=9)])

        self.client._call = call
        self.log_reads = []

        def read_logs(request, **_):
            self.log_reads.append(request)
            return self.FakeLogCall(b"task output\n")

        self.client._jobs.ReadJobLogs = read_logs

    def test_list_of_an_array_asks_for_its_tasks(self):
        tasks = self.client.list(array="j-a", state="running")
        self.assertEqual([(t.id, t.array_index) for t in tasks], [("j-a-9", 9)])
        self.assertEqual(self.requests[0].array_id, "j-a")
        self.assertEqual(self.requests[0].state, job_pb2.JOB_STATE_RUNNING)
        self.client.list()
        self.assertEqual(self.requests[1].array_id, "", "no array: jobs and arrays, no tasks")

    def test_logs_with_index_reads_the_tasks_log(self):
        self.assertEqual("".join(self.client.logs("j-a", index=6, rank=0)), "task output\n")
        self.assertEqual(self.log_reads[0].job_id, "j-a-6")

    def test_logs_with_index_names_what_is_wrong(self):
        cases = [("j-p", 0, errors.InvalidArgument,
                  "index: job j-p is not an array; read its log without index"),
                 ("j-a", 10, errors.InvalidArgument, "index: array j-a has tasks 0..9, got 10"),
                 ("j-a", -1, errors.InvalidArgument, "index: expected a task index >= 0, got -1"),
                 ("j-a", 7, errors.NotFound,
                  "task 7 of array j-a has not been created yet, so it has no log (3 tasks "
                  "wait for the parallelism limit, the array's dependencies or room)")]
        for job, index, kind, message in cases:
            with self.subTest(job=job, index=index):
                with self.assertRaises(kind) as cm:
                    "".join(self.client.logs(job, index=index))
                self.assertEqual(str(cm.exception), message)
        self.assertEqual(self.log_reads, [], "nothing read when the index is wrong")


class ClientTest(unittest.TestCase):
    def test_help_documents_every_call(self):
        text = pydoc.render_doc(ringmaster.Client, renderer=pydoc.plaintext)
        for call in ("submit", "get", "list", "cancel", "watch", "logs", "wait"):
            self.assertIn(f"{call}(self", text)
        self.assertIn("Raises:", text)
        self.assertIn("InvalidSpec", text)

    def test_address_defaults_to_the_environment_then_localhost(self):
        old = os.environ.pop("RINGMASTER_SCHEDULER", None)
        try:
            self.assertEqual(ringmaster.Client().address, "localhost:7070")
            os.environ["RINGMASTER_SCHEDULER"] = "sched:7070"
            self.assertEqual(ringmaster.Client().address, "sched:7070")
            self.assertEqual(ringmaster.Client("other:1").address, "other:1")
        finally:
            os.environ.pop("RINGMASTER_SCHEDULER", None)
            if old is not None:
                os.environ["RINGMASTER_SCHEDULER"] = old

    def test_tls_settings_are_checked(self):
        with self.assertRaises(ValueError):
            ringmaster.Client("x:1", tls={"ca": None, "bogus": "1"})
        with self.assertRaises(ValueError):
            ringmaster.Client("x:1", tls={"cert": "/c.pem"})
        ringmaster.Client("x:1", tls=True).close()

    def test_a_submit_to_nobody_fails_unavailable_after_retrying(self):
        # Waits of 0.25 and 0.5 s fit in 1 s; a third, of 1 s, would not.
        with ringmaster.Client("127.0.0.1:1", timeout=1, retry_seconds=1) as client:
            with self.assertRaises(errors.Unavailable) as cm:
                client.submit(name="x", replicas=1)
        self.assertIn("(tried 3 times)", str(cm.exception))
        with ringmaster.Client("127.0.0.1:1", timeout=1, retry_seconds=0) as client:
            with self.assertRaises(errors.Unavailable) as cm:
                client.submit(name="x", replicas=1)
        self.assertIn("(tried 1 time)", str(cm.exception))
        with self.assertRaises(ValueError):
            ringmaster.Client("127.0.0.1:1", retry_seconds=-1)


if __name__ == "__main__":
    unittest.main()
