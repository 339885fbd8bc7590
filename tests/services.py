"""Real services for the tests, started and stopped by the tests: a local Ray cluster and an S3 API.

Loaded as a pytest plugin (``pytest_plugins`` in conftest.py), so every test module can ask for:

- ``ray_cluster``: ``ray.init(num_cpus=2)`` once per session (Ray takes seconds to start), shut
  down at the end;
- ``s3``: moto's ``ThreadedMotoServer`` on 127.0.0.1 on a free port, once per session, with a fresh
  bucket for each test; the standard AWS environment (credentials, region, ``AWS_ENDPOINT_URL``)
  is set for the test, so s3fs reaches it as a user's would reach S3.

Both skip where their package is missing, and fail under ``CI=true`` (see :mod:`tests.needs`).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from needs import need_module

# The environment a user of S3 would set; moto accepts these test credentials.
AWS_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[object]:
    """A local Ray cluster with 2 CPUs, shared by every test of the session."""
    ray = need_module("ray", 'pip install ".[ray]"')
    need_module("ray.data", 'pip install ".[ray]"')
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(tests_dir)
    # Workers import gym_recorder and sample_envs from this checkout, and the tests' helpers.
    path = os.pathsep.join([root, tests_dir, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}},
             _system_config={"metrics_report_interval_ms": 60_000})
    try:
        yield ray
    finally:
        ray.shutdown()


@dataclass
class S3Server:
    """A running moto S3 server and a bucket of one test."""

    endpoint: str
    bucket: str
    server: object = field(repr=False)

    def url(self, key: str = "") -> str:
        """``s3://BUCKET/key``."""
        return f"s3://{self.bucket}/{key}".rstrip("/")

    @property
    def options(self) -> dict:
        """storage_options for s3fs that reach the server (the environment does too)."""
        return {"endpoint_url": self.endpoint}

    def filesystem(self):
        """A fresh s3fs filesystem on the server (no listings cache shared with the code)."""
        import s3fs

        return s3fs.S3FileSystem(endpoint_url=self.endpoint, skip_instance_cache=True,
                                 use_listings_cache=False)


@pytest.fixture(scope="session")
def _moto_server() -> Iterator[tuple[object, str]]:
    need_module("s3fs", 'pip install ".[cloud]"')
    need_module("boto3", 'pip install ".[test]"')
    server_mod = need_module("moto.server", 'pip install "moto[server]"')
    port = free_port()
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield server, f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture()
def s3(_moto_server, monkeypatch) -> S3Server:
    """The moto S3 server with a new empty bucket and the AWS environment set for this test."""
    import boto3

    server, endpoint = _moto_server
    for k, v in AWS_TEST_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    bucket = f"rec-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    return S3Server(endpoint=endpoint, bucket=bucket, server=server)
