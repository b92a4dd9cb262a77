"""The contract: the names and small pure rules that the library (components/), the program and verify
(infra/), the in-cluster controllers (controllers/) and the trainer (trainer/) share, at the bottom of the
layers (tests/unit/repo/test_layers.py).

One place, so the writer and every reader agree: what the library writes into deployed objects (label
keys, taints, annotations, a controller's permissions, the config it hands a controller) and what the
controllers, the trainer, `trainplane status` and `verify` read back (Event reasons, node conditions,
metric, recording-rule and alert names).

- recovery.py: the GPU health loop's names (quarantine, return, the goodput series) and its XID signal;
- idle.py: idle reclaim's names and the permissions it needs;
- rack.py: rack-scale GPUs (NVL72): the ComputeDomain API, DeviceClasses, the clique label;
- quota.py: how a flavor's GPUs are split across the teams' ClusterQueues (the plan and the Capacity Block
  window controller apply the same rule).

Standard library only, and nothing of the project: every layer and every image (the controller image, the
trainer image) carries this package. The values are in deployed objects and in users' dashboards and
alerts: changing one is a migration, not a rename.
"""
