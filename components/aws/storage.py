"""Shared file systems: FSx for Lustre (`kind: lustre`) and EFS (`kind: nfs`), as storage handles.

Neither waits for the EKS cluster: both admit the node security group, which exists before the cluster,
so the ten minutes FSx takes to create run in parallel with the control plane. The in-cluster layer
binds each handle to a static PersistentVolume (ReadWriteMany) through the FSx or EFS CSI driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.aws.profile import FSX_CSI_DRIVER
from components.bundle import StorageHandle
from components.spec import StorageSpec

EFS_CSI = "efs.csi.aws.com"
NFS_PORT = 2049
DEFAULT_LUSTRE_GIB = 1200
DEFAULT_THROUGHPUT = 250
# EFS grows with its data; PersistentVolumes still need a capacity, which the EFS driver ignores.
EFS_NOMINAL_GIB = 1024


@dataclass(frozen=True, kw_only=True)
class StorageArgs:
    spec: StorageSpec
    cluster_name: str
    vpc_id: pulumi.Input[str]
    subnet_ids: Sequence[pulumi.Input[str]]
    node_security_group_id: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str]
    tags: dict[str, str] = field(default_factory=dict)


def _client_rules(
    name: str,
    sg: aws.ec2.SecurityGroup,
    sources: dict[str, pulumi.Input[str]],
    port_ranges: Sequence[tuple[int, int]],
    opts: pulumi.ResourceOptions,
    tags: dict[str, str],
) -> list[pulumi.Resource]:
    rules: list[pulumi.Resource] = []
    for source_name, source in sources.items():
        for lo, hi in port_ranges:
            rule = aws.vpc.SecurityGroupIngressRule(
                f"{name}-{source_name}-{lo}" if lo == hi else f"{name}-{source_name}-{lo}-{hi}",
                security_group_id=sg.id,
                referenced_security_group_id=source,
                ip_protocol="tcp",
                from_port=lo,
                to_port=hi,
                description=f"{source_name}: TCP {lo}" + ("" if lo == hi else f"-{hi}"),
                tags=tags,
                opts=opts,
            )
            rules.append(rule)
    return rules


class LustreStorage(pulumi.ComponentResource):
    """FSx for Lustre PERSISTENT_2 with LZ4 compression, KMS encryption and an optional S3 link."""

    handle: StorageHandle

    def __init__(self, name: str, args: StorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:aws:LustreStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        st = args.spec
        tags = {**args.tags, "Name": f"{args.cluster_name}-{st.name}"}
        sg = aws.ec2.SecurityGroup(
            f"{name}-sg",
            vpc_id=args.vpc_id,
            description=f"FSx for Lustre {st.name}: Lustre from the nodes and between file servers",
            tags=tags,
            opts=child,
        )
        # The file servers talk to each other on the same ports, so the group admits itself too.
        rules = _client_rules(
            f"{name}-sg",
            sg,
            {"nodes": args.node_security_group_id, "self": sg.id},
            # Lustre clients reach the file servers on TCP 988 and 1018-1023 (FSx for Lustre user guide).
            [(988, 988), (1018, 1023)],
            child,
            tags,
        )
        egress = aws.vpc.SecurityGroupEgressRule(
            f"{name}-sg-out",
            security_group_id=sg.id,
            cidr_ipv4="0.0.0.0/0",
            ip_protocol="-1",
            description="Replies to clients and S3 data repository traffic",
            tags=tags,
            opts=child,
        )
        capacity = st.capacity_gib or DEFAULT_LUSTRE_GIB
        fs = aws.fsx.LustreFileSystem(
            f"{name}-fs",
            deployment_type="PERSISTENT_2",
            storage_type="SSD",
            storage_capacity=capacity,
            per_unit_storage_throughput=st.throughput_per_tib or DEFAULT_THROUGHPUT,
            data_compression_type="LZ4",
            kms_key_id=args.kms_key_arn,
            # FSx for Lustre lives in one subnet (pulumi-aws v7 takes a single id here).
            subnet_ids=args.subnet_ids[0],
            security_group_ids=[sg.id],
            file_system_type_version="2.15",
            tags=tags,
            # CreateFileSystem checks the groups for LNET traffic (TCP 988) when called and fails with
            # 400 InvalidNetworkSettings if the rules are not there yet: wait for them
            # (aws/aws-parallelcluster#6181, fixed the same way in aws/aws-parallelcluster#6342).
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*rules, egress]),
        )
        for path, direction in _repositories(st):
            s3 = aws.fsx.DataRepositoryAssociationS3Args(
                auto_import_policy=aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(
                    events=["NEW", "CHANGED", "DELETED"]
                )
                if "import" in direction
                else None,
                auto_export_policy=aws.fsx.DataRepositoryAssociationS3AutoExportPolicyArgs(
                    events=["NEW", "CHANGED", "DELETED"]
                )
                if "export" in direction
                else None,
            )
            aws.fsx.DataRepositoryAssociation(
                f"{name}-dra-{'-'.join(direction)}",
                file_system_id=fs.id,
                file_system_path=_fs_path(st, direction),
                data_repository_path=path,
                batch_import_meta_data_on_create="import" in direction,
                s3=s3,
                tags=tags,
                opts=child,
            )
        self.handle = StorageHandle(
            name=st.name,
            kind="lustre",
            capacity_gib=capacity,
            csi_driver=FSX_CSI_DRIVER,
            volume_handle=fs.id,
            volume_attributes={"dnsname": fs.dns_name, "mountname": fs.mount_name},
            # flock: training code and DCP take POSIX locks on shared files.
            mount_options=("flock",),
            endpoint=fs.dns_name,
        )
        self.register_outputs({"fileSystemId": fs.id})


def _repositories(st: StorageSpec) -> list[tuple[str, tuple[str, ...]]]:
    """(S3 path, directions) per data repository association: one when import and export agree."""
    if st.import_path and st.import_path == st.export_path:
        return [(st.import_path, ("import", "export"))]
    out: list[tuple[str, tuple[str, ...]]] = []
    if st.import_path:
        out.append((st.import_path, ("import",)))
    if st.export_path:
        out.append((st.export_path, ("export",)))
    return out


def _fs_path(st: StorageSpec, direction: tuple[str, ...]) -> str:
    # One association may link the root; two need their own directories.
    if len(_repositories(st)) == 1:
        return "/"
    return f"/{direction[0]}"


class EfsStorage(pulumi.ComponentResource):
    """EFS (elastic throughput, KMS-encrypted) with one mount target per node subnet."""

    handle: StorageHandle

    def __init__(self, name: str, args: StorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainplane:aws:EfsStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        st = args.spec
        tags = {**args.tags, "Name": f"{args.cluster_name}-{st.name}"}
        sg = aws.ec2.SecurityGroup(
            f"{name}-sg",
            vpc_id=args.vpc_id,
            description=f"EFS {st.name}: NFS from the nodes",
            tags=tags,
            opts=child,
        )
        _client_rules(
            f"{name}-sg", sg, {"nodes": args.node_security_group_id}, [(NFS_PORT, NFS_PORT)], child, tags
        )
        fs = aws.efs.FileSystem(
            f"{name}-fs",
            encrypted=True,
            kms_key_id=args.kms_key_arn,
            performance_mode="generalPurpose",
            # Elastic: throughput follows the workload (checkpoint bursts) without provisioning.
            throughput_mode="elastic",
            tags=tags,
            opts=child,
        )
        for i, subnet in enumerate(args.subnet_ids):
            aws.efs.MountTarget(
                f"{name}-mt-{i}",
                file_system_id=fs.id,
                subnet_id=subnet,
                security_groups=[sg.id],
                opts=child,
            )
        self.handle = StorageHandle(
            name=st.name,
            kind="nfs",
            capacity_gib=EFS_NOMINAL_GIB,
            csi_driver=EFS_CSI,
            volume_handle=fs.id,
            mount_options=tuple(st.mount_options),
            endpoint=fs.dns_name,
        )
        self.register_outputs({"fileSystemId": fs.id})
