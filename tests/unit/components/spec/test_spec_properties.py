"""Property-based: any config, random or a mutated reference stack, is accepted or rejected with
path-named one-line problems, never with another exception."""

from __future__ import annotations

import copy
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.spec import ConfigError, PlatformSpec
from tests.helpers.plans import platform_object

LINE = re.compile(r"^platform(\.[A-Za-z]+|\[\d+\])*(\.[A-Za-z0-9_./-]+|\[(\'.*\'|\".*\")\])?: \S")

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(
        ["aws", "gcp", "kubernetes", "H100", "spot", "lustre", "nfs", "10.0.0.0/16", "1.33", "s3://x/y"]
    ),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
REFERENCE = {s: platform_object(s) for s in ("aws-dev", "gcp-dev", "onprem-dev")}


def check(raw) -> None:
    try:
        PlatformSpec.load(raw)
    except ConfigError as e:
        assert e.problems, "a ConfigError must carry at least one problem"
        for line in e.problems:
            assert "\n" not in line
            assert LINE.match(line), line


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_random_values_are_accepted_or_rejected_cleanly(raw):
    check(raw)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


@st.composite
def mutated_stacks(draw):
    raw = copy.deepcopy(REFERENCE[draw(st.sampled_from(sorted(REFERENCE)))])
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = [p for p in _paths(raw) if p]
        path = draw(st.sampled_from(paths))
        parent = raw
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "add-key", "swap-in-known"]))
        last = path[-1]
        if action == "replace":
            parent[last] = draw(json_values)
        elif action == "delete":
            del parent[last]
        elif action == "add-key" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10))] = draw(json_values)
        elif action == "swap-in-known":
            parent[last] = draw(
                st.sampled_from([0, 1, 3, 4800, 9000, "H200", "B200", "compact", True, [], {}])
            )
    return raw


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_stacks())
def test_mutated_reference_stacks_are_accepted_or_rejected_cleanly(raw):
    check(raw)
