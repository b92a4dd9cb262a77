"""The `trainplane` commands, one module each: plan.py (plan, render), verify.py, nccl_test.py, status.py. Each
module adds its parser (`add_parsers`) and runs its command; infra/cli.py wires them and maps errors to
the exit codes below."""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_CONFIG = EXIT_INPUT  # the name earlier versions used

# One table for every command, printed by `--help` (and in the README): scripts and CI branch on it.
EXIT_CODES = """exit codes (every command):
  0  ok: planned, rendered, every check passed, bandwidth at or above the floor
  1  a check failed: verify (offline, live or --cloud) found a problem, or nccl-test measured less than
     the floor or got no result from a preflight it ran
  2  the command could not do its job: invalid stack file or config, unknown stack or flag, a job or
     namespace status cannot find, a cluster, Prometheus or cloud that cannot be reached or read, no
     credentials, or verify --cloud with no check it can run on that cloud; one line per problem on
     stderr, no traceback
  3  internal error (a bug): one line on stderr; --debug shows the traceback"""
