"""Where an AWS platform may go and what it may run on: availability zones of its region, and the EC2
instance type names (data/instance_types.yaml, the provider SDK's list, with its source).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import cache
from importlib import resources

import yaml

from components.regions import did_you_mean, regions, unknown_gpu_machine

# EC2 families that carry GPUs: P and G (and Gr) accelerated computing instances, UltraServer nodes
# (p6e-gb200) included (EC2 user guide, "Accelerated computing instance specifications").
GPU_FAMILY = re.compile(r"^(?:p\d|gr?\d)[a-z0-9-]*(?=\.)")


@cache
def aws_instance_types() -> frozenset[str]:
    text = resources.files("components.aws").joinpath("data/instance_types.yaml").read_text()
    return frozenset(yaml.safe_load(text)["instanceTypes"])


def aws_zone_problems(region: str | None, zones: Sequence[str], path: str) -> Iterable[str]:
    """An availability zone is the region's name and one letter (us-east-1a)."""
    if region is None:
        return
    for j, z in enumerate(zones):
        if not re.fullmatch(re.escape(region) + r"[a-z]", z):
            # A zone of another region is no typo: no suggestion for it.
            other = z[:-1] in regions("aws")
            hint = "" if other else did_you_mean(z, [f"{region}{c}" for c in "abcdef"])
            yield f"{path}[{j}]: {z!r} is not an availability zone of region {region}{hint}"


def instance_type_problem(name: str, catalog_names: Sequence[str]) -> str | None:
    """Why `name` is not an EC2 instance type (None when it is one): every instance type the provider
    SDK knows is one."""
    if name in catalog_names:
        return None
    if family := GPU_FAMILY.match(name):
        gpu_types = [n for n in catalog_names if GPU_FAMILY.match(n)]
        return unknown_gpu_machine(name, family.group(0), gpu_types, "EC2 family")
    if name in aws_instance_types():
        return None
    hint = did_you_mean(name, catalog_names, 0.8) or did_you_mean(name, sorted(aws_instance_types()))
    return f"{name!r} is not an EC2 instance type{hint}"
