"""The instance types EC2 sells as Capacity Blocks for ML (pure data: the AWS spec rules and the capacity
kinds `trainplane gpus` lists both read it). A Capacity Block of any other type cannot be bought, so a pool
asking for one is refused at load, not at `pulumi up` with no block to launch into.

asOf 2026-11-28. Sources, each naming part of the list (AWS publishes no single machine-readable one):
- EC2 user guide, "Capacity Blocks for ML" (docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html):
  p5.48xlarge, p5e.48xlarge, p5en.48xlarge, p4d.24xlarge, trn1.32xlarge, trn2.48xlarge, and UltraServers;
- AWS PCS user guide, "Using Amazon EC2 Capacity Blocks for ML with AWS PCS": the P6-B300, P6-B200, P5en,
  P5e, P5 and P4d families;
- SageMaker API ReservedCapacityInstanceType (AWS SDK for Kotlin 1.5.59; the training-plan offerings are
  Capacity Blocks): adds p4de.24xlarge, p5.4xlarge and p6e-gb200.36xlarge;
- AWS What's New 2025-12, "P6e-GB300 UltraServers" GA (sold as Capacity Blocks): p6e-gb300.36xlarge.
"""

from __future__ import annotations

CAPACITY_BLOCK_TYPES = frozenset(
    {
        "p4d.24xlarge",
        "p4de.24xlarge",
        "p5.4xlarge",
        "p5.48xlarge",
        "p5e.48xlarge",
        "p5en.48xlarge",
        "p6-b200.48xlarge",
        "p6-b300.48xlarge",
        "p6e-gb200.36xlarge",
        "p6e-gb300.36xlarge",
        "trn1.32xlarge",
        "trn2.48xlarge",
    }
)
