"""trainplane's in-cluster controllers: the GPU health operator (kopf; quarantine, node return, straggler
suspects and idle reclaim run in it) and the Capacity Block window agent, one package in one image
(`trainplane-controller <gpu-health|block-window>`, controllers/__main__.py; docs/in-cluster.md).

It imports nothing of components/, infra/ or trainer/ (tests/unit/test_architecture.py): the image carries
this package, kopf and the `kubernetes` client only. The library imports its dependency-free modules (the
names: recovery_names, idle_names; the decisions the plan shares: kueue_quota, gpu_health_agent) to build
the objects the controllers act on, never the kopf operator (gpu_health_operator) nor the entry point.
"""
