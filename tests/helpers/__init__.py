"""Helpers the tests share (import them from here, never from another test file).

- plans.py: reference-stack plans (once per process), inline platform plans, `one`, `upstream`;
- aws.py / gcp.py / jobs.py: resource types and lookups of the AWS, GCP and job-stack tests;
- verify_plans.py: verify on a planned stack and on edited copies of its dump;
- cli.py: the CLI in-process (`cli(...)`) and as a real process (`trainplane(...)`);
- fake_k8s.py: the one fake Kubernetes API server (loopback HTTP) and its kubeconfig;
- imports.py: modules a fresh interpreter loads (dependency checks);
- trainer.py: the trainer's real processes (launch, Proc), run flags and checkpoint comparisons;
- scrape.py, jobset_sim.py, aws_bundle_program.py: models of Prometheus' scrape, the JobSet controller
  and a bundle-only AWS program.
"""
