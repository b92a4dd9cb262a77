"""Helpers the tests share (import them from here, never from another test file).

- plans.py: reference-stack plans (once per process), inline platform plans, `one`, `upstream`, and the
  per-process cache of mock-engine runs the in-process CLI shares;
- cli.py: the CLI in-process (`cli(...)`, unit tier) and as a real process (`trainplane(...)`, the one
  smoke test per command in tests/integration/infra/test_cli.py);
- fake_k8s.py: the one fake Kubernetes API server (loopback HTTP, routes objects) and its kubeconfig;
  fake_kube.py: its stateful routes (discovery, list + watch, patches, subresources) a kopf operator runs on;
- deps.py: the modules a fresh interpreter loads (the runtime dependency walker; helper d's imports.py,
  when merged, is the static one: see the TODO in deps.py);
- aws.py / gcp.py / jobs.py / queues.py / gpu_health.py / promql.py / templates.py: resource types,
  lookups and inputs the tests of one area share in both tiers;
- verify_plans.py: verify on a planned stack and on edited copies of its dump;
- mockplan.py: ../shared/checks/mockplan.py's dump of a reference stack, once per session (tests/conftest.py's
  `mockplan` fixture); session.py: the folder and locks the xdist workers of a session share;
- trainer.py: the trainer's real processes (launch, Proc; single, finished, preempted), run flags
  (run_args) and checkpoint comparisons (its fixtures are in tests/integration/trainer/conftest.py);
- scrape.py, jobset_sim.py, aws_bundle_program.py: models of Prometheus' scrape and the JobSet
  controller, and a bundle-only AWS program.
"""
