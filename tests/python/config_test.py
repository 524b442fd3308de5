"""The Python client's config file (ringmaster.config), the one ringctl reads: where the
scheduler is and which CA to trust, below arguments and the environment.

    PYTHONPATH=python:build/python python3 -m unittest -v tests/python/config_test.py
"""

import os
import tempfile
import unittest
from unittest import mock

import grpc

import ringmaster
from ringmaster import errors
from ringmaster.config import load_config, parse_config
import spec_test  # its fake gRPC error; a module import, so its tests do not run twice

_RpcError = spec_test.ErrorsTest.FakeRpcError

class ConfigTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.home = self.dir.name
        os.makedirs(os.path.join(self.home, "ringmaster"))
        self.path = os.path.join(self.home, "ringmaster", "config")
        # Only the variables a test sets: none of the developer's own.
        self.env = mock.patch.dict(os.environ, {"XDG_CONFIG_HOME": self.home}, clear=True)
        self.env.start()

    def tearDown(self):
        self.env.stop()
        self.dir.cleanup()

    def pem(self, name):
        """A file the client can read as a CA bundle (it verifies nothing until a call)."""
        path = os.path.join(self.home, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
        return path

    def write(self, text):
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(text)

    def test_a_new_shell_finds_the_scheduler_and_ca_in_the_file(self):
        self.write("scheduler: 127.0.0.1:7171\ntls_ca: certs/ca.crt\n")
        os.makedirs(os.path.join(self.home, "ringmaster", "certs"))
        self.pem(os.path.join("ringmaster", "certs", "ca.crt"))
        client = ringmaster.Client()
        try:
            self.assertEqual(client.address, "127.0.0.1:7171")
            self.assertEqual(
                client._tls.ca, os.path.join(self.home, "ringmaster", "certs", "ca.crt")
            )
        finally:
            client.close()

    def test_arguments_then_environment_then_file(self):
        file_ca, env_ca = self.pem("file-ca.crt"), self.pem("env-ca.crt")
        self.write(f"scheduler: file-host:1\ntls_ca: {file_ca}\ninsecure: false\n")
        os.environ["RINGMASTER_SCHEDULER"] = "env-host:2"
        os.environ["RINGMASTER_TLS_CA"] = env_ca
        client = ringmaster.Client()
        try:
            self.assertEqual(client.address, "env-host:2")
            self.assertEqual(client._tls.ca, env_ca)
        finally:
            client.close()
        client = ringmaster.Client("arg-host:3", tls=False)
        try:
            self.assertEqual(client.address, "arg-host:3")
            self.assertIsNone(client._tls)
        finally:
            client.close()

    def test_insecure_in_the_file_yields_to_the_environment(self):
        self.write("insecure: true\n")
        client = ringmaster.Client()
        self.assertIsNone(client._tls)
        client.close()
        os.environ["RINGMASTER_INSECURE"] = "0"
        client = ringmaster.Client()
        self.assertIsNotNone(client._tls)
        client.close()

    def test_no_file_means_the_defaults(self):
        self.assertIsNone(load_config())
        client = ringmaster.Client()
        self.assertEqual(client.address, ringmaster.DEFAULT_SCHEDULER)
        client.close()

    def test_ringmaster_config_names_the_file_and_a_missing_one_is_an_error(self):
        other = os.path.join(self.home, "other.yaml")
        with open(other, "w", encoding="utf-8") as f:
            f.write("scheduler: named-host:5\n")
        os.environ["RINGMASTER_CONFIG"] = other
        self.assertEqual(load_config().scheduler, "named-host:5")
        os.environ["RINGMASTER_CONFIG"] = other + ".missing"
        with self.assertRaisesRegex(FileNotFoundError, "RINGMASTER_CONFIG"):
            load_config()

    def test_bad_files_name_the_file_and_the_key(self):
        with self.assertRaisesRegex(ValueError, r"unknown key 'tls-ca' \(allowed: scheduler"):
            parse_config("tls-ca: /x\n", "/c")
        with self.assertRaisesRegex(ValueError, "insecure: expected true or false"):
            parse_config("insecure: maybe\n", "/c")
        with self.assertRaisesRegex(ValueError, "tls_ca: expected a single value"):
            parse_config("tls_ca: [a, b]\n", "/c")
        with self.assertRaisesRegex(ValueError, "scheduler: must not be empty"):
            parse_config("scheduler: ''\n", "/c")
        with self.assertRaisesRegex(ValueError, "config file /c: expected a mapping"):
            parse_config("- a\n", "/c")
        self.assertIsNone(parse_config("# nothing\n", "/c").scheduler)

    def test_an_untrusted_certificate_is_its_own_error_and_is_not_retried(self):
        error = errors.from_rpc_error(
            _RpcError(
                grpc.StatusCode.UNAVAILABLE,
                "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:7070: "
                "Ssl handshake failed: SSL_ERROR_SSL: error:1000007d:SSL routines:"
                "OPENSSL_internal:CERTIFICATE_VERIFY_FAILED",
            )
        )
        self.assertIsInstance(error, errors.CertificateNotTrusted)
        self.assertIsInstance(error, errors.Unavailable)
        self.assertIn("answered, but its TLS certificate is not trusted", str(error))
        self.assertIn("tls_ca", str(error))
        calls = []

        def untrusted():
            calls.append(1)
            raise error

        client = ringmaster.Client("127.0.0.1:1", tls=False, retry_seconds=30)
        try:
            with self.assertRaises(errors.CertificateNotTrusted):
                client._retry(untrusted)
        finally:
            client.close()
        self.assertEqual(len(calls), 1)
        plain = errors.from_rpc_error(_RpcError(grpc.StatusCode.UNAVAILABLE, "connection refused"))
        self.assertNotIsInstance(plain, errors.CertificateNotTrusted)


if __name__ == "__main__":
    unittest.main()
