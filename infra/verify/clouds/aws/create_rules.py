"""verify `cloud` on AWS (AwsVerifier.verify_create_rules): would EC2, EKS and FSx accept our create calls?

Create-time requirements (the rules and their sources are data: `createRules` and `addonVersions` in the
verifier's facts.yaml; each finding starts with the rule's name):
- capacity-block-template / capacity-block-node-group: a CAPACITY_BLOCK node group's launch template
  names the instance type, market type capacity-block and the block as reservation target; the node
  group names no instance types; the pool runs in one zone;
- odcr-target: a `reservation` pool's template targets its reservation (preference omitted or
  capacity-reservations-only), from one subnet in one zone;
- efa-interfaces: an EFA template has one interface per EFA device of every instance type of the pool
  (catalog), card 0 at device 0 as EFA with ENA, every other card once at device 1, security groups on
  the interfaces only, a cluster placement group unless a reservation places the nodes, one zone;
- fsx-persistent2: PERSISTENT_2 capacity and throughput values FSx accepts, one subnet;
- addon-version: an add-on whose configuration or instance types need a release names one at least that.
The check itself, and the creation order (`createOrder`, any cloud): infra/verify/checks/create_rules.py
and create_order.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from components.catalog import catalog
from infra.verify import facts as F
from infra.verify.checks.create_order import Graph
from infra.verify.context import Context
from infra.verify.model import PlanResource
from infra.verify.report import CheckResult

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
ADDON = "aws:eks/addon:Addon"
POOL_LABEL = "trainplane.dev/pool"
EFA_TYPES = ("efa", "efa-only")


def create_rules(ctx: Context, res: CheckResult) -> None:
    """What EC2, EKS and FSx check when the plan's resources are created (AwsVerifier.verify_create_rules)."""
    AwsRules(ctx, res).run()


def _version(text: str | None) -> tuple[int, ...] | None:
    m = re.match(r"v?(\d+)\.(\d+)\.(\d+)", text or "")
    return tuple(int(x) for x in m.groups()) if m else None


class AwsRules:
    def __init__(self, ctx: Context, res: CheckResult):
        self.ctx, self.res, self.plan = ctx, res, ctx.platform
        self.facts: Mapping[str, Any] = F.cloud(self.plan.cloud).get("createRules") or {}
        self.graph = Graph(self.plan)

    def fail(self, rule: str, subject: str, reason: str, *objects: str, source: str | None = None) -> None:
        source = source or (self.facts.get(rule) or {}).get("source", "")
        self.res.fail(f"{rule}: {subject}: {reason} ({source})", *objects)

    def instance_types(self, ng: PlanResource) -> list[str]:
        """The node group's instance types, or its template's one (a Capacity Block pool)."""
        lt = self._template(ng)
        one = lt.inputs.get("instanceType") if lt else None
        return list(ng.inputs.get("instanceTypes") or ([str(one)] if one else []))

    def run(self) -> None:
        groups = self.plan.of_type(NODE_GROUP)
        for ng in groups:
            self.node_group(ng)
        lustre = self.plan.of_type(LUSTRE)
        for fs in lustre:
            self.fsx(fs)
        self.addons(groups)
        self.res.examined.append(f"{len(groups)} node groups, {len(lustre)} Lustre file systems")

    # ---- node groups ------------------------------------------------------------------------------
    def _template(self, ng: PlanResource) -> PlanResource | None:
        urns = self.graph.direct_of_type(ng, LAUNCH_TEMPLATE)
        return self.graph.by_urn[sorted(urns)[0]] if urns else None

    def _zones(self, ng: PlanResource) -> set[str]:
        """The zones of the node group's subnets, where the plan makes them (unknown for a brought VPC)."""
        subnets = [self.graph.by_urn[u] for u in self.graph.direct_of_type(ng, SUBNET)]
        return {str(s.inputs["availabilityZone"]) for s in subnets if s.inputs.get("availabilityZone")}

    def _one_zone(self, rule: str, subject: str, ng: PlanResource) -> None:
        subnets = ng.inputs.get("subnetIds") or []
        zones = self._zones(ng)
        if len(subnets) != 1 or len(zones) > 1:
            self.fail(
                rule,
                subject,
                f"{len(subnets)} subnets in zones {sorted(zones)}: it lives in one zone",
                ng.urn,
            )

    def node_group(self, ng: PlanResource) -> None:
        name = str(ng.inputs.get("nodeGroupName") or ng.name)
        pool = self.ctx.pool(str((ng.inputs.get("labels") or {}).get(POOL_LABEL, "")))
        lt = self._template(ng)
        lti: Mapping[str, Any] = lt.inputs if lt else {}
        subject = f"node group {name}"
        target = (
            (lti.get("capacityReservationSpecification") or {}).get("capacityReservationTarget") or {}
        ).get("capacityReservationId")
        reservation = pool.reservation if pool else None
        if ng.inputs.get("capacityType") == "CAPACITY_BLOCK":
            self.capacity_block(subject, ng, lti, target, reservation)
        elif (pool is not None and pool.capacity == "reservation") or target:
            self.odcr(subject, ng, lti, target, reservation)
        if any(n.get("interfaceType") in EFA_TYPES for n in lti.get("networkInterfaces") or []):
            self.efa(subject, ng, lti, self.instance_types(ng), bool(reservation or target))

    def capacity_block(self, subject, ng, lti, target, reservation) -> None:
        rule = "capacity-block-template"
        if not lti.get("instanceType"):
            self.fail(rule, subject, "its launch template names no InstanceType", ng.urn)
        market = (lti.get("instanceMarketOptions") or {}).get("marketType")
        if market != self.facts[rule]["marketType"]:
            self.fail(rule, subject, f"launch template market type {market!r}, not 'capacity-block'", ng.urn)
        if not target or (reservation and target != reservation):
            self.fail(
                rule, subject, f"launch template targets {target!r}, not the block {reservation!r}", ng.urn
            )
        if ng.inputs.get("instanceTypes"):
            self.fail(
                "capacity-block-node-group",
                subject,
                f"names instance types {ng.inputs['instanceTypes']}: a Capacity Block node group names none",
                ng.urn,
            )
        self._one_zone(rule, subject, ng)

    def odcr(self, subject, ng, lti, target, reservation) -> None:
        rule = "odcr-target"
        spec = lti.get("capacityReservationSpecification") or {}
        if not target or (reservation and target != reservation):
            self.fail(
                rule,
                subject,
                f"launch template targets {target!r}, not the reservation {reservation!r}",
                ng.urn,
            )
        preference = spec.get("capacityReservationPreference")
        if preference is not None and preference not in self.facts[rule]["preferences"]:
            self.fail(rule, subject, f"preference {preference!r} with a reservation target", ng.urn)
        self._one_zone(rule, subject, ng)

    def efa(self, subject, ng, lti, types, reserved) -> None:
        rule, f = "efa-interfaces", self.facts["efa-interfaces"]
        nics = sorted(lti.get("networkInterfaces") or [], key=lambda n: int(n.get("networkCardIndex") or 0))
        for t in types:
            shape = catalog().machine("aws", t)
            want = shape.efa_interfaces if shape else None
            if want is not None and want != len(nics):
                self.fail(rule, subject, f"{len(nics)} EFA interfaces, {t} has {want}", ng.urn)
        cards = [int(n.get("networkCardIndex") or 0) for n in nics]
        if cards != list(range(len(nics))):
            self.fail(rule, subject, f"network card indices {cards}: one interface per card from 0", ng.urn)
        for n in nics:
            card, dev, kind = (
                int(n.get("networkCardIndex") or 0),
                int(n.get("deviceIndex") or 0),
                n.get("interfaceType"),
            )
            want_rule = f["primary"] if card == 0 else f["others"]
            if dev != want_rule["deviceIndex"] or kind not in want_rule["interfaceTypes"]:
                self.fail(
                    rule,
                    subject,
                    f"card {card}: device {dev} type {kind!r}, wants device {want_rule['deviceIndex']} "
                    f"type {'/'.join(want_rule['interfaceTypes'])}",
                    ng.urn,
                )
        if lti.get("vpcSecurityGroupIds"):
            self.fail(rule, subject, "security groups both on the template and its interfaces", ng.urn)
        if not reserved and not (lti.get("placement") or {}).get("groupName"):
            self.fail(rule, subject, "no cluster placement group", ng.urn)
        self._one_zone(rule, subject, ng)

    # ---- FSx ----------------------------------------------------------------------------------------
    def fsx(self, fs: PlanResource) -> None:
        rule, f, i = "fsx-persistent2", self.facts["fsx-persistent2"], fs.inputs
        if i.get("deploymentType") != f["deploymentType"]:
            return
        subject = f"Lustre file system {fs.name}"
        gib = int(i.get("storageCapacity") or 0)
        if gib != f["smallestGiB"] and (gib <= 0 or gib % f["stepGiB"]):
            self.fail(rule, subject, f"{gib} GiB: {f['smallestGiB']} or a multiple of {f['stepGiB']}", fs.urn)
        tput = i.get("perUnitStorageThroughput")
        if tput not in f["throughputs"]:
            self.fail(rule, subject, f"throughput {tput} MB/s/TiB not one of {f['throughputs']}", fs.urn)
        subnets = i.get("subnetIds")
        if isinstance(subnets, list) and len(subnets) != 1:
            self.fail(rule, subject, f"{len(subnets)} subnets: one", fs.urn)

    # ---- add-on versions ----------------------------------------------------------------------------
    def addons(self, groups: list[PlanResource]) -> None:
        known = F.cloud(self.plan.cloud).get("addonVersions") or {}
        types = {t for g in groups for t in self.instance_types(g)}
        for addon in self.plan.of_type(ADDON):
            name = str(addon.inputs.get("addonName"))
            f = known.get(name)
            if not f:
                continue
            src = str(f.get("source", ""))
            config = json.loads(addon.inputs.get("configurationValues") or "{}")
            needs = [(k, v) for k, v in (f.get("configKeys") or {}).items() if F.dig(config, k) is not None]
            gpu_types = sorted(t for t in types if (s := catalog().machine("aws", t)) and s.gpus)
            if gpu_types and f.get("instanceTypesSince"):
                needs.append((f"instance types {', '.join(gpu_types)}", f["instanceTypesSince"]))
                for t in gpu_types:
                    if t not in f.get("instanceTypes", []):
                        self.fail(
                            "addon-version",
                            f"add-on {name}",
                            f"no release known to handle {t}",
                            addon.urn,
                            source=src,
                        )
            have = _version(addon.inputs.get("addonVersion"))
            for what, since in needs:
                if have is None or have < (_version(since) or ()):
                    self.fail(
                        "addon-version",
                        f"add-on {name}",
                        f"version {addon.inputs.get('addonVersion')!r}; {what} need {since} or later",
                        addon.urn,
                        source=src,
                    )
