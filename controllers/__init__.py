"""trainplane's in-cluster controllers: the GPU health operator (kopf; quarantine, node return, straggler
suspects and idle reclaim run in it) and the Capacity Block window agent, one package in one image
(`trainplane-controller <gpu-health|block-window>`, controllers/__main__.py; docs/in-cluster.md).

It imports only itself, contract/ (the names and rules it shares with the library, the trainer and
verify), the standard library, kopf, the `kubernetes` client and prometheus-client
(tests/unit/repo/test_architecture.py, tests/unit/repo/test_layers.py): the image carries exactly these. Nothing of the
product imports it: the library refers to the controllers by their image and `trainplane-controller <agent>`
command only.
"""
