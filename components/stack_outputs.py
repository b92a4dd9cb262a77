"""Reading another stack's outputs inside a stack's program: a job stack reads its platform's (and, on a
fleet, the fleet's and every worker's: components/job_fleet_stack.py); a fleet stack its platforms'."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime.sync_await import _sync_await
from pydantic import ValidationError

from components.outputs import READ_KEYS, PlatformOutputs
from components.spec import ConfigError
from trainer.contract import format_validation_error


def read_outputs(ref: pulumi.StackReference, keys: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """The stack's outputs of these keys that it exports, read synchronously (secret ones included)."""
    values: dict[str, Any] = {}
    for key in keys:
        details = _sync_await(ref.get_output_details(key))
        value = details.value if details.value is not None else details.secret_value
        if value is not None:
            values[key] = value
    return values


def read_platform(ref: pulumi.StackReference, name: str) -> PlatformOutputs:
    """The platform stack's outputs, parsed into PlatformOutputs before anything else is registered.

    Reading them synchronously (rather than building inside `.apply`) keeps every job resource visible
    to `pulumi preview`; the engine knows a stack reference's outputs during preview too. Keys the
    platform does not export (it predates them) take their defaults.
    """
    values = read_outputs(ref, READ_KEYS)
    if values.get("clusterName") is None:
        raise ConfigError(
            [f"job.platformStack: stack {name} has no trainplane platform outputs (is it deployed?)"]
        )
    try:
        return PlatformOutputs.model_validate(values)
    except ValidationError as e:
        raise ConfigError(
            format_validation_error(e, PlatformOutputs, f"platform stack {name} outputs")
        ) from None
