"""The mock engine's alias computation (infra/mockcloud RecordingMonitor.alias_urns), which
test_urns.py relies on to accept a renamed or retyped resource, agrees with Pulumi's own rules:

- with the SDK's alias logic (pulumi.runtime.resource.all_aliases, what the SDK sends an engine that
  takes no alias specs), under a monitor that hands out real engine URNs;
- with the engine's (step_generator.go: a resource matches its old URN through its own aliases, and a
  child through its parent's matched alias, transitively): every resource of an "after" program finds
  the URN the same resource had in the "before" program.
"""

from __future__ import annotations

import asyncio

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings
from pulumi.runtime.resource import all_aliases

from infra.mockcloud import MockCloud, RecordingMonitor

STACK, PROJECT = "dev", "trainplane"


class EngineUrnMonitor(RecordingMonitor):
    """Answers with the URN a real engine gives: the parent's whole type chain, the root stack left out."""

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        if parent and parent.split("::")[2] != "pulumi:pulumi:Stack":
            type_ = f"{parent.split('::')[2]}${type_}"
        return f"urn:pulumi:{STACK}::{PROJECT}::{type_}::{name}"


class Component(pulumi.ComponentResource):
    def __init__(self, type_: str, name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__(type_, name, None, opts)


def _run(program, monitor_class=RecordingMonitor) -> RecordingMonitor:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    settings.ROOT.set(None)
    mocks = MockCloud({})
    monitor = monitor_class(mocks)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=STACK, preview=False, monitor=monitor)

    @pulumi.runtime.test
    def _test():
        return program()

    try:
        _test()
    finally:
        loop.close()
        asyncio.set_event_loop(None)
    return monitor


def _bucket(name: str, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    return pulumi.CustomResource("aws:s3/bucket:Bucket", name, {}, opts)


def before():
    """The shape of a deployed stack: a GPU pool component, a bucket under the cloud, a renamed role."""
    platform = Component("trainplane:index:GpuPlatform", "ml")
    cloud = Component("trainplane:aws:AwsCloud", "ml", pulumi.ResourceOptions(parent=platform))
    pool = Component("trainplane:aws:GpuNodePool", "ml-h100", pulumi.ResourceOptions(parent=cloud))
    lt = _bucket("ml-h100-lt", pulumi.ResourceOptions(parent=pool))
    _bucket("ml-h100-lt-tag", pulumi.ResourceOptions(parent=lt))
    _bucket("shared-name", pulumi.ResourceOptions(parent=pool))
    _bucket("ml-logs", pulumi.ResourceOptions(parent=cloud))
    _bucket("ml-role-old", pulumi.ResourceOptions(parent=pool))
    _bucket("ml-h100-spare", pulumi.ResourceOptions(parent=pool))
    net = Component("trainplane:aws:Network", "ml-net", pulumi.ResourceOptions(parent=cloud))
    _bucket("ml-net-vpc", pulumi.ResourceOptions(parent=net))


def after(record: dict | None = None):
    """The same stack after a retype (pool), a move under a new component (bucket) and a rename (role).

    With `record`, the SDK's own aliases of each resource are collected into it (name -> [Output]).
    """

    def opts(name: str, type_: str, **kw) -> pulumi.ResourceOptions:
        o = pulumi.ResourceOptions(**kw)
        if record is not None:
            record[name] = all_aliases(o.aliases, name, type_, o.parent)
        return o

    platform = Component("trainplane:index:GpuPlatform", "ml")
    cloud = Component("trainplane:aws:AwsCloud", "ml", pulumi.ResourceOptions(parent=platform))
    t = "trainplane:aws:NodePool"
    pool = Component(
        t,
        "ml-h100",
        opts("ml-h100", t, parent=cloud, aliases=[pulumi.Alias(type_="trainplane:aws:GpuNodePool")]),
    )
    b = "aws:s3/bucket:Bucket"
    lt = _bucket("ml-h100-lt", opts("ml-h100-lt", b, parent=pool))
    _bucket("ml-h100-lt-tag", opts("ml-h100-lt-tag", b, parent=lt))
    _bucket("shared-name", opts("shared-name", b, parent=pool))
    buckets = Component("trainplane:aws:PlatformBuckets", "ml-buckets", pulumi.ResourceOptions(parent=cloud))
    _bucket("ml-logs", opts("ml-logs", b, parent=buckets, aliases=[pulumi.Alias(parent=cloud)]))
    _bucket("ml-role", opts("ml-role", b, parent=pool, aliases=[pulumi.Alias(name="ml-role-old")]))
    # Moved from under the (retyped) pool to a component of its own: the alias names the pool.
    extras = Component("trainplane:aws:Extras", "ml-extras", pulumi.ResourceOptions(parent=cloud))
    _bucket("ml-h100-spare", opts("ml-h100-spare", b, parent=extras, aliases=[pulumi.Alias(parent=pool)]))
    # A renamed component: its child, named after it, is found under the old prefix.
    n = "trainplane:aws:Network"
    net = Component(
        n, "ml-network", opts("ml-network", n, parent=cloud, aliases=[pulumi.Alias(name="ml-net")])
    )
    _bucket("ml-network-vpc", opts("ml-network-vpc", b, parent=net))


RENAMED = {"ml-role": "ml-role-old", "ml-network": "ml-net", "ml-network-vpc": "ml-net-vpc"}


def _identity(r) -> str:
    """A resource's identity across the two programs: its name before the rename."""
    return RENAMED.get(r.name, r.name)


def _kept(r) -> bool:
    return r.custom or r.type in (
        "trainplane:aws:NodePool",
        "trainplane:aws:GpuNodePool",
        "trainplane:aws:Network",
    )


def test_every_resource_finds_its_old_urn_by_the_engines_rules():
    old = {_identity(r): r.engine_urn for r in _run(before).records if _kept(r)}
    new = {_identity(r): r for r in _run(after).records if _kept(r)}
    assert set(old) == set(new)
    changed = {k for k in old if old[k] != new[k].engine_urn}
    # What moved: the pool (type), its children and grandchild (parent type), the bucket, the role.
    assert changed == {
        *("ml-h100", "ml-h100-lt", "ml-h100-lt-tag", "shared-name", "ml-logs", "ml-role-old"),
        *("ml-h100-spare", "ml-net", "ml-net-vpc"),
    }
    missing = {k: old[k] for k in changed if old[k] not in new[k].alias_urns}
    assert missing == {}


def test_the_aliases_agree_with_the_sdks_alias_logic():
    record: dict = {}
    sdk: dict[str, set[str]] = {}

    def program():
        after(record)

        async def resolve():
            for name, outs in record.items():
                sdk[name] = {await pulumi.Output.from_input(o).future() for o in outs}

        return pulumi.Output.from_input(asyncio.ensure_future(resolve()))

    monitor = _run(program, EngineUrnMonitor)
    mine = {r.name: set(r.alias_urns) for r in monitor.records if r.name in record}
    # The SDK multiplies a child's aliases by its parent's own aliases only; the engine (and the mock)
    # also by the aliases the parent inherited. One level down from an aliased parent they coincide.
    one_level = {"ml-h100", "ml-h100-lt", "shared-name", "ml-logs", "ml-role", "ml-network", "ml-network-vpc"}
    assert {n: mine[n] for n in one_level} == {n: sdk[n] for n in one_level}
    # The grandchild, and an alias whose parent was itself aliased: the SDK's answer is part of the
    # mock's, which adds what the engine finds through the parent's matched alias.
    assert sdk["ml-h100-lt-tag"] <= mine["ml-h100-lt-tag"]
    assert sdk["ml-h100-spare"] < mine["ml-h100-spare"]


def test_mock_urns_and_engine_urns_differ_only_in_the_parent_chain():
    records = _run(before).records
    (tag,) = [r for r in records if r.name == "ml-h100-lt-tag"]
    assert tag.engine_urn == (
        "urn:pulumi:dev::trainplane::trainplane:index:GpuPlatform$trainplane:aws:AwsCloud"
        "$trainplane:aws:GpuNodePool$aws:s3/bucket:Bucket$aws:s3/bucket:Bucket::ml-h100-lt-tag"
    )
    assert isinstance(pulumi_mocks.MockMonitor, type)
