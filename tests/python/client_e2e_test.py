"""The Python client against a real cluster: scheduler, Postgres, Redis and worker agents that
run real ranks. Started by python_client_e2e_test (client_e2e_test.cc), which passes the
scheduler's address in $RINGMASTER_SCHEDULER; unittest only.

    RINGMASTER_SCHEDULER=HOST:PORT PYTHONPATH=python:build/python \\
        python3 -m unittest -v tests/python/client_e2e_test.py
"""

import os
import tempfile
import time
import unittest
import uuid

import grpc

import ringmaster
from ringmaster import JobState, errors
from ringmaster.v1 import job_pb2

# Every rank says who it is; rank 0 also writes to stderr (logs interleave both).
HELLO = 'echo "hello from rank $RANK of $WORLD_SIZE"; [ "$RANK" = 0 ] && echo oops >&2; true'


def shell(name, replicas, script, **fields):
    return {"name": name, "replicas": replicas,
            "command": {"argv": ["/bin/sh", "-c", script]}, **fields}


class ClientE2eTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.address = os.environ["RINGMASTER_SCHEDULER"]
        cls.client = ringmaster.Client(cls.address)

    @classmethod
    def tearDownClass(cls):
        for job in cls.client.list():
            if not job.done:
                cls.client.cancel(job, reason="test cleanup")
        cls.client.close()

    def wait_state(self, job, state, timeout=30.0):
        """Follows the job's events until it enters `state`; returns the events seen."""
        seen = []
        deadline = time.monotonic() + timeout
        for event in self.client.watch(job):
            seen.append(event)
            if event.state == state:
                return seen
            self.assertLess(time.monotonic(), deadline, f"{job.id} never reached {state}: {seen}")
        self.fail(f"{job.id} ended without reaching {state}: {seen}")

    def test_submit_watch_to_succeeded_then_read_every_rank_log(self):
        job = self.client.submit(shell("hello", 2, HELLO), labels={"suite": "python"})
        self.assertTrue(job.id.startswith("j-"), job.id)
        self.assertEqual(job.state, JobState.PENDING)
        self.assertFalse(job.existing)
        self.assertEqual(job.labels, {"suite": "python"})

        events = list(self.client.watch(job))
        self.assertEqual([e.seq for e in events], list(range(1, len(events) + 1)))
        self.assertEqual(events[0].state, JobState.PENDING)
        self.assertEqual(events[-1].state, JobState.SUCCEEDED)
        self.assertIn(JobState.RUNNING, [e.state for e in events])
        self.assertTrue(all(e.job_id == job.id for e in events))

        final = self.client.wait(job, timeout=5)
        self.assertEqual(final.state, "SUCCEEDED")
        self.assertTrue(final.succeeded and final.done)
        self.assertIsNotNone(final.finished_at)

        log0 = "".join(self.client.logs(job))
        self.assertIn("hello from rank 0 of 2", log0)
        self.assertIn("oops", log0)
        self.assertIn("hello from rank 1 of 2", "".join(self.client.logs(job.id, rank=1)))
        with self.assertRaises(errors.InvalidArgument) as cm:
            list(self.client.logs(job, rank=2))
        self.assertIn("has 2 ranks", str(cm.exception))

        listed = self.client.list(state="succeeded")
        self.assertIn(job.id, [j.id for j in listed])
        self.assertNotIn(job.id, [j.id for j in self.client.list(state=JobState.FAILED)])

    def test_submit_from_a_yaml_file_with_keyword_overrides(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("name: from-yaml\nreplicas: 3\nlabels: {team: vision}\n"
                    "command:\n  argv: [/bin/sh, -c, 'echo \"$GREETING $RANK\"']\n"
                    "  env: {GREETING: bonjour}\n")
        try:
            job = self.client.submit(f.name, replicas=1, labels={"run": "7"})
        finally:
            os.unlink(f.name)
        self.assertEqual(job.spec["replicas"], 1)
        self.assertEqual(job.labels, {"team": "vision", "run": "7"})
        self.assertEqual(job.spec["command"]["env"], {"GREETING": "bonjour"})
        self.client.wait(job, timeout=30)
        self.assertIn("bonjour 0", "".join(self.client.logs(job)))

    def test_follow_streams_output_while_the_job_runs(self):
        job = self.client.submit(
            shell("follow", 1, "for i in 1 2 3; do echo tick $i; sleep 0.3; done"))
        # Right after submit: follow waits for the job to start.
        text = "".join(self.client.logs(job, follow=True))
        self.assertEqual([line for line in text.splitlines() if line.startswith("tick")],
                         ["tick 1", "tick 2", "tick 3"])
        self.assertTrue(self.client.wait(job, timeout=30).succeeded)

    def test_cancel_a_running_job(self):
        job = self.client.submit(shell("sleeper", 2, "sleep 300"))
        self.wait_state(job, JobState.RUNNING)
        cancelled = self.client.cancel(job, reason="no longer needed")
        self.assertEqual(cancelled.id, job.id)
        events = list(self.client.watch(job))
        self.assertEqual(events[-1].state, JobState.CANCELLED)
        with self.assertRaises(errors.JobCancelled) as cm:
            self.client.wait(job, timeout=30)
        self.assertEqual(cm.exception.job.state, JobState.CANCELLED)
        self.assertIn("no longer needed", str(cm.exception))
        self.assertIsInstance(cm.exception, errors.JobFailed)
        with self.assertRaises(errors.FailedPrecondition) as cm2:
            self.client.cancel(job)
        self.assertEqual(cm2.exception.code, grpc.StatusCode.FAILED_PRECONDITION)

    def test_wait_raises_with_the_jobs_message_when_a_rank_fails(self):
        job = self.client.submit(shell("fails", 1, "exit 3"))
        with self.assertRaises(errors.JobFailed) as cm:
            self.client.wait(job, timeout=30)
        self.assertEqual(cm.exception.job.state, JobState.FAILED)
        self.assertEqual(cm.exception.job.exit_code, 3)
        self.assertIn(f"job {job.id} ended FAILED: ", str(cm.exception))
        self.assertIn("3", cm.exception.job.message)
        self.assertIsNone(cm.exception.code)

    def test_wait_times_out_on_a_job_that_keeps_running(self):
        job = self.client.submit(shell("long", 1, "sleep 300"))
        start = time.monotonic()
        with self.assertRaises(errors.WaitTimeout) as cm:
            self.client.wait(job, timeout=1.0)
        self.assertLess(time.monotonic() - start, 10)
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertFalse(cm.exception.job.done)
        self.client.cancel(job)

    def test_a_bad_spec_raises_invalid_spec_with_the_schedulers_message(self):
        with self.assertRaises(errors.InvalidSpec) as cm:
            self.client.submit(name="bad", replicas=0)
        self.assertEqual(str(cm.exception), "replicas: must be 1..4096, got 0")
        self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        # Caught on the client's side, before any call: the same exception class.
        with self.assertRaises(errors.InvalidSpec) as cm:
            self.client.submit({"name": "bad", "replicas": "two"})
        self.assertEqual(str(cm.exception), 'replicas: expected an integer, got "two"')

    def test_a_job_after_another_runs_after_its_success_and_one_after_its_failure_is_cancelled(self):
        first = self.client.submit(shell("first", 1, "sleep 1"))
        after = self.client.submit(shell("after", 1, "true"), after=[first.id])
        on_failure = self.client.submit(shell("on-failure", 1, "true"),
                                        after=[f"{first.id}:failed"])
        self.assertEqual([d.job_id for d in after.proto.spec.after], [first.id])
        self.assertTrue(self.client.wait(after, timeout=30).succeeded)
        first = self.client.get(first.id)
        self.assertTrue(first.succeeded)
        self.assertGreaterEqual(self.client.get(after.id).started_at, first.finished_at)
        with self.assertRaises(errors.JobCancelled) as cm:
            self.client.wait(on_failure, timeout=30)
        self.assertIn(f"{first.id} ended SUCCEEDED, and this job waits for it to fail",
                      cm.exception.job.message)
        self.assertIsNone(cm.exception.job.started_at)
        with self.assertRaises(errors.NotFound):
            self.client.submit(shell("orphan", 1, "true"), after=["j-0123456789ab:ended"])

    def test_an_array_runs_its_tasks_and_its_status_logs_and_list_say_so(self):
        array = self.client.submit(
            shell("sweep", 1, "echo task $RINGMASTER_ARRAY_INDEX argv {index}"), array="0-4%2")
        self.assertTrue(array.is_array)
        done = self.client.wait(array, timeout=60)
        self.assertTrue(done.succeeded)
        self.assertEqual(done.array_status.succeeded, 5)
        self.assertEqual(done.array_status.waiting, 0)
        self.assertIn("task 3 argv 3", "".join(self.client.logs(array, index=3)))
        tasks = self.client.list(array=array.id)
        self.assertEqual(sorted(t.array_index for t in tasks), [0, 1, 2, 3, 4])
        self.assertTrue(all(t.array_id == array.id for t in tasks))
        self.assertNotIn(f"{array.id}-0", [j.id for j in self.client.list(limit=50)])
        big = self.client.submit(shell("big", 1, "sleep 60"), array=100000)
        self.assertEqual(self.client.cancel(big).state, JobState.CANCELLED)
        deadline = time.monotonic() + 10
        while (self.client.get(big.id).array_status.cancelled < 100000
               and time.monotonic() < deadline):
            time.sleep(0.05)  # its live tasks' cancellations are stored after the array's
        self.assertEqual(self.client.get(big.id).array_status.cancelled, 100000)

    def test_a_one_rank_job_starts_without_mpirun_unless_it_asks(self):
        probe = 'echo "world=$WORLD_SIZE ompi=${OMPI_COMM_WORLD_SIZE:-none}"'
        direct = self.client.wait(self.client.submit(shell("direct", 1, probe)), timeout=30)
        under = self.client.wait(self.client.submit(shell("under", 1, probe), use_mpirun=True),
                                 timeout=60)
        self.assertIn("world=1 ompi=none", "".join(self.client.logs(direct)))
        self.assertIn("world=1 ompi=1", "".join(self.client.logs(under)))

    def test_resubmitting_with_the_same_request_id_returns_the_same_job(self):
        request_id = "python-e2e-" + uuid.uuid4().hex
        spec = shell("idempotent", 1, "true")
        first = self.client.submit(spec, request_id=request_id)
        again = self.client.submit(spec, request_id=request_id)
        self.assertEqual(again.id, first.id)
        self.assertFalse(first.existing)
        self.assertTrue(again.existing)
        self.assertEqual(again.request_id, request_id)
        with self.assertRaises(errors.AlreadyExists):
            self.client.submit(spec, request_id=request_id, replicas=2)
        # Job.spec is a spec: submitting it again (new request id) makes a copy.
        copy = self.client.submit(first.spec)
        self.assertNotEqual(copy.id, first.id)
        self.assertEqual(copy.spec, first.spec)
        self.client.wait(first, timeout=30)
        self.client.wait(copy, timeout=30)

    def test_list_pages_through_the_jobs_a_label_selector_picks(self):
        batch = uuid.uuid4().hex[:12]
        ids = [self.client.submit(shell(f"page-{i}", 1, "true"), labels={"batch": batch}).id
               for i in range(5)]
        newest_first = ids[::-1]
        self.assertEqual([j.id for j in self.client.list(labels={"batch": batch}, page_size=2)],
                         newest_first)
        self.assertEqual(
            [j.id for j in self.client.list(labels=f"batch={batch}", limit=3, page_size=2)],
            newest_first[:3])
        self.assertEqual(
            [j.id for j in self.client.iter_jobs(labels=f"batch=={batch},!nope,batch!=x",
                                                 page_size=1)],
            newest_first)
        self.assertEqual(self.client.list(labels=f"batch={batch},nope"), [])
        with self.assertRaises(errors.InvalidArgument) as cm:
            self.client.list(labels="a=b=c")
        self.assertIn('label_selector: "a=b=c"', str(cm.exception))
        # The raw call: a token is opaque, and only continues the list it came from.
        first = self.client._jobs.ListJobs(
            job_pb2.ListJobsRequest(label_selector=f"batch={batch}", page_size=2),
            metadata=self.client._metadata)
        self.assertEqual(len(first.jobs), 2)
        self.assertTrue(first.next_page_token)
        for bad in (job_pb2.ListJobsRequest(page_token="bogus"),
                    job_pb2.ListJobsRequest(page_token=first.next_page_token, queue="other")):
            with self.assertRaises(grpc.RpcError) as cm:
                self.client._jobs.ListJobs(bad, metadata=self.client._metadata)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertTrue(cm.exception.details().startswith("page_token: "),
                            cm.exception.details())
        for job_id in ids:
            self.client.wait(job_id, timeout=60)

    def test_queues_are_created_read_listed_refused_and_deleted(self):
        name = f"py-{uuid.uuid4().hex[:8]}"
        created = self.client.create_queue(
            name,
            cohort="lab",
            weight=2,
            quotas={"t4": 2, "cpu": {"nominal": 4, "lending_limit": 1}},
            reclaim_within_cohort="Any",
            within_queue="LowerPriority",
        )
        self.assertEqual(created.queue.name, name)
        got = self.client.get_queue(name)
        self.assertEqual(got.queue.resources["t4"].nominal, 2)
        self.assertEqual(got.queue.resources["cpu"].lending_limit, 1)
        self.assertEqual(got.queue.weight, 2)
        self.assertIn(name, [q.queue.name for q in self.client.list_queues()])
        with self.assertRaises(ringmaster.InvalidArgument) as bad:
            self.client.update_queue(name, cohort="lab", weight=5000)
        self.assertIn("weight", str(bad.exception))
        with self.assertRaises(ValueError):
            self.client.create_queue("x", reclaim_within_cohort="Sometimes")
        self.client.delete_queue(name)
        with self.assertRaises(ringmaster.NotFound):
            self.client.get_queue(name)
        with self.assertRaises(ringmaster.FailedPrecondition):
            self.client.delete_queue("default")

    def test_registry_credentials_are_set_listed_without_the_secret_and_deleted(self):
        team = f"py-{uuid.uuid4().hex[:8]}"
        secret = "py-registry-s3cret"
        shown = self.client.set_registry_credential("GHCR.io", "robot", secret, team=team)
        self.assertEqual((shown.team, shown.registry, shown.username), (team, "ghcr.io", "robot"))
        self.assertNotIn(secret, str(shown))
        listed = self.client.list_registry_credentials(team=team)
        self.assertEqual([(c.registry, c.username) for c in listed], [("ghcr.io", "robot")])
        everyone = self.client.list_registry_credentials(team="*")
        self.assertIn(team, [c.team for c in everyone])
        self.assertNotIn(secret, str(everyone))
        with self.assertRaises(ringmaster.InvalidArgument) as bad:
            self.client.set_registry_credential("https://ghcr.io", "robot", secret, team=team)
        self.assertIn("registry", str(bad.exception))
        self.assertNotIn(secret, str(bad.exception))
        self.client.delete_registry_credential("ghcr.io", team=team)
        with self.assertRaises(ringmaster.NotFound):
            self.client.delete_registry_credential("ghcr.io", team=team)

    def test_volumes_are_created_mounted_refused_while_mounted_and_deleted(self):
        name = f"py-{uuid.uuid4().hex[:8]}"
        created = self.client.create_volume(name, "/mnt/py", grants={"team-x": True},
                                            description="e2e")
        self.assertEqual(created.host_path, "/mnt/py")
        self.assertIn(name, [v.name for v in self.client.list_volumes()])
        with self.assertRaises(ringmaster.InvalidArgument) as bad:
            self.client.update_volume(name, "/etc/ringmaster")
        self.assertIn("host_path", str(bad.exception))
        # A GPU type no worker has: the job waits, and its image is never pulled.
        job = self.client.submit(name="mounts", replicas=1, gpus_per_replica=1, gpu_type="h900",
                                 command=["true"], image="train:v1",
                                 mounts=[f"{name}:/data:ro"], shm_size="1Gi", workdir="/w")
        got = self.client.get(job.id)
        self.assertEqual(got.spec["image"], "train:v1")
        self.assertEqual(got.spec["shm_size"], 1 << 30)
        self.assertEqual(got.image_digest, "")
        with self.assertRaises(ringmaster.FailedPrecondition) as busy:
            self.client.delete_volume(name)
        self.assertIn(job.id, str(busy.exception))
        self.client.cancel(job.id)
        self.client.delete_volume(name)
        with self.assertRaises(ringmaster.NotFound):
            self.client.get_volume(name)

    def test_unknown_job_is_not_found(self):
        with self.assertRaises(errors.NotFound) as cm:
            self.client.get("j-000000000000")
        self.assertEqual(cm.exception.code, grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(errors.NotFound):
            list(self.client.watch("j-000000000000"))

    def test_an_address_where_nobody_listens_is_unavailable(self):
        with ringmaster.Client("127.0.0.1:1", timeout=2) as dead:
            with self.assertRaises(errors.Unavailable):
                dead.get("j-000000000000")

    def test_the_bearer_token_comes_from_the_environment_or_the_argument(self):
        # The harness exports the admin token as RINGMASTER_TOKEN; Client() found it above.
        token = os.environ["RINGMASTER_TOKEN"]
        with ringmaster.Client(self.address, token=token) as c:
            self.assertEqual(c.get(self.client.submit(shell("tok", 1, "true")).id).name, "tok")
        with ringmaster.Client(self.address, token="t0ken") as c:
            with self.assertRaises(errors.Unauthenticated):
                c.list(limit=1)


if __name__ == "__main__":
    unittest.main()
