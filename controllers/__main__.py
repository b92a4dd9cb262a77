"""The controller image's entry point: `trainplane-controller gpu-health | block-window [options]`.

gpu-health: the kopf operator (gpu_health_operator.py) run standalone over all namespaces (one replica
and no KopfPeering CRD: see there), with kopf's liveness endpoint; its config file is named by
GPU_HEALTH_CONFIG. block-window: the Capacity Block window agent's loop (block_window_agent.py).
"""

from __future__ import annotations

import argparse
import sys


def gpu_health(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="trainplane-controller gpu-health")
    # The pod's livenessProbe polls it (components/incluster/gpu_health_controller.py names the port).
    parser.add_argument("--liveness", help="kopf's liveness endpoint, e.g. http://0.0.0.0:8080/healthz")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    # Imported here, not at the top: block-window runs without kopf's import time and memory.
    import kopf

    from controllers import gpu_health_operator  # noqa: F401  (registers the handlers)

    kopf.configure(verbose=args.verbose)
    kopf.run(standalone=True, clusterwide=True, liveness_endpoint=args.liveness)
    return 0


def block_window(argv: list[str]) -> int:
    from controllers import block_window_agent

    return block_window_agent.main(argv)


COMMANDS = {"gpu-health": gpu_health, "block-window": block_window}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in COMMANDS:
        print(f"usage: trainplane-controller {{{','.join(COMMANDS)}}} [options]", file=sys.stderr)
        return 2
    return COMMANDS[args[0]](args[1:])


if __name__ == "__main__":
    sys.exit(main())
