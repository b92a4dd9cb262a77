"""A Pulumi program for the tests: the AWS layer alone, exporting the ClusterBundle it hands over.

Run with `run_program(config, stack, program=BUNDLE_PROGRAM)`; config `trainplane:platform` holds an
aws platform object. The in-cluster layer reads the bundle's Python fields, which the real program never
exports; this program exports the ones the in-cluster layer must use (storage class and what to wait on).
"""

from __future__ import annotations

from pathlib import Path

import pulumi

from components.aws.cloud import AwsCloud, AwsCloudArgs
from components.spec import PlatformSpec

BUNDLE_PROGRAM = Path(__file__).resolve()

if __name__ == "__main__":
    spec = PlatformSpec.load(pulumi.Config("trainplane").require_object("platform"))
    bundle = AwsCloud(spec.cluster.name, AwsCloudArgs(spec=spec)).bundle
    pulumi.export("storageClass", bundle.storage_class)
    pulumi.export("storageReady", [r.urn for r in bundle.storage_ready])
