"""Availability zones per AWS region as the offline plan answers them (name, zone id), in the region's
order. Generated from moto 5.2.5 (moto/ec2/models/availability_zones_and_regions.py,
`RegionsAndZonesBackend.zones`); tests/unit/components/aws/test_mock_zones.py keeps it equal to the installed moto.
Zone ids map to names per account; these are moto's, which is all an offline plan needs."""

from __future__ import annotations

MOTO_VERSION = "5.2.5"
ZONES: dict[str, tuple[tuple[str, str], ...]] = {
    "af-south-1": (
        ("af-south-1a", "afs1-az1"),
        ("af-south-1b", "afs1-az2"),
        ("af-south-1c", "afs1-az3"),
    ),
    "ap-east-1": (
        ("ap-east-1a", "ape1-az1"),
        ("ap-east-1b", "ape1-az2"),
        ("ap-east-1c", "ape1-az3"),
    ),
    "ap-east-2": (
        ("ap-east-2a", "ape2-az1"),
        ("ap-east-2b", "ape2-az2"),
        ("ap-east-2c", "ape2-az3"),
    ),
    "ap-northeast-1": (
        ("ap-northeast-1a", "apne1-az4"),
        ("ap-northeast-1c", "apne1-az1"),
        ("ap-northeast-1d", "apne1-az2"),
    ),
    "ap-northeast-2": (
        ("ap-northeast-2a", "apne2-az1"),
        ("ap-northeast-2b", "apne2-az2"),
        ("ap-northeast-2c", "apne2-az3"),
        ("ap-northeast-2d", "apne2-az4"),
    ),
    "ap-northeast-3": (
        ("ap-northeast-3a", "apne3-az1"),
        ("ap-northeast-3b", "apne3-az2"),
        ("ap-northeast-3c", "apne3-az3"),
    ),
    "ap-south-1": (
        ("ap-south-1a", "aps1-az1"),
        ("ap-south-1b", "aps1-az3"),
        ("ap-south-1c", "aps1-az2"),
    ),
    "ap-south-2": (
        ("ap-south-2a", "aps2-az1"),
        ("ap-south-2b", "aps2-az2"),
        ("ap-south-2c", "aps2-az3"),
    ),
    "ap-southeast-1": (
        ("ap-southeast-1a", "apse1-az1"),
        ("ap-southeast-1b", "apse1-az2"),
        ("ap-southeast-1c", "apse1-az3"),
    ),
    "ap-southeast-2": (
        ("ap-southeast-2a", "apse2-az1"),
        ("ap-southeast-2b", "apse2-az3"),
        ("ap-southeast-2c", "apse2-az2"),
    ),
    "ap-southeast-3": (
        ("ap-southeast-3a", "apse3-az1"),
        ("ap-southeast-3b", "apse3-az2"),
        ("ap-southeast-3c", "apse3-az3"),
    ),
    "ap-southeast-4": (
        ("ap-southeast-4a", "apse4-az1"),
        ("ap-southeast-4b", "apse4-az2"),
        ("ap-southeast-4c", "apse4-az3"),
    ),
    "ap-southeast-5": (
        ("ap-southeast-5a", "apse5-az1"),
        ("ap-southeast-5b", "apse5-az2"),
        ("ap-southeast-5c", "apse5-az3"),
    ),
    "ap-southeast-6": (
        ("ap-southeast-6a", "apse6-az1"),
        ("ap-southeast-6b", "apse6-az2"),
        ("ap-southeast-6c", "apse6-az3"),
    ),
    "ap-southeast-7": (
        ("ap-southeast-7a", "apse7-az1"),
        ("ap-southeast-7b", "apse7-az2"),
        ("ap-southeast-7c", "apse7-az3"),
    ),
    "ca-central-1": (
        ("ca-central-1a", "cac1-az1"),
        ("ca-central-1b", "cac1-az2"),
        ("ca-central-1d", "cac1-az4"),
    ),
    "ca-west-1": (
        ("ca-west-1a", "caw1-az1"),
        ("ca-west-1b", "caw1-az2"),
        ("ca-west-1c", "caw1-az3"),
    ),
    "cn-north-1": (
        ("cn-north-1a", "cnn1-az1"),
        ("cn-north-1b", "cnn1-az2"),
    ),
    "cn-northwest-1": (
        ("cn-northwest-1a", "cnnw1-az1"),
        ("cn-northwest-1b", "cnnw1-az2"),
        ("cn-northwest-1c", "cnnw1-az3"),
    ),
    "eu-central-1": (
        ("eu-central-1a", "euc1-az1"),
        ("eu-central-1b", "euc1-az2"),
        ("eu-central-1c", "euc1-az3"),
    ),
    "eu-central-2": (
        ("eu-central-2a", "euc2-az1"),
        ("eu-central-2b", "euc2-az2"),
        ("eu-central-2c", "euc2-az3"),
    ),
    "eu-north-1": (
        ("eu-north-1a", "eun1-az1"),
        ("eu-north-1b", "eun1-az2"),
        ("eu-north-1c", "eun1-az3"),
    ),
    "eu-south-1": (
        ("eu-south-1a", "eus1-az1"),
        ("eu-south-1b", "eus1-az2"),
        ("eu-south-1c", "eus1-az3"),
    ),
    "eu-south-2": (
        ("eu-south-2a", "eus2-az1"),
        ("eu-south-2b", "eus2-az2"),
        ("eu-south-2c", "eus2-az3"),
    ),
    "eu-west-1": (
        ("eu-west-1a", "euw1-az3"),
        ("eu-west-1b", "euw1-az1"),
        ("eu-west-1c", "euw1-az2"),
    ),
    "eu-west-2": (
        ("eu-west-2a", "euw2-az2"),
        ("eu-west-2b", "euw2-az3"),
        ("eu-west-2c", "euw2-az1"),
    ),
    "eu-west-3": (
        ("eu-west-3a", "euw3-az1"),
        ("eu-west-3b", "euw3-az2"),
        ("eu-west-3c", "euw3-az3"),
    ),
    "il-central-1": (
        ("il-central-1a", "ilc1-az1"),
        ("il-central-1b", "ilc1-az2"),
        ("il-central-1c", "ilc1-az3"),
    ),
    "me-central-1": (
        ("me-central-1a", "mec1-az1"),
        ("me-central-1b", "mec1-az2"),
        ("me-central-1c", "mec1-az3"),
    ),
    "me-south-1": (
        ("me-south-1a", "mes1-az1"),
        ("me-south-1b", "mes1-az2"),
        ("me-south-1c", "mes1-az3"),
    ),
    "mx-central-1": (
        ("mx-central-1a", "mxc1-az1"),
        ("mx-central-1b", "mxc1-az2"),
        ("mx-central-1c", "mxc1-az3"),
    ),
    "sa-east-1": (
        ("sa-east-1a", "sae1-az1"),
        ("sa-east-1b", "sae1-az2"),
        ("sa-east-1c", "sae1-az3"),
    ),
    "us-east-1": (
        ("us-east-1a", "use1-az6"),
        ("us-east-1b", "use1-az1"),
        ("us-east-1c", "use1-az2"),
        ("us-east-1d", "use1-az4"),
        ("us-east-1e", "use1-az3"),
        ("us-east-1f", "use1-az5"),
    ),
    "us-east-2": (
        ("us-east-2a", "use2-az1"),
        ("us-east-2b", "use2-az2"),
        ("us-east-2c", "use2-az3"),
    ),
    "us-gov-east-1": (
        ("us-gov-east-1a", "usge1-az1"),
        ("us-gov-east-1b", "usge1-az2"),
        ("us-gov-east-1c", "usge1-az3"),
    ),
    "us-gov-west-1": (
        ("us-gov-west-1a", "usgw1-az1"),
        ("us-gov-west-1b", "usgw1-az2"),
        ("us-gov-west-1c", "usgw1-az3"),
    ),
    "us-west-1": (
        ("us-west-1a", "usw1-az3"),
        ("us-west-1b", "usw1-az1"),
    ),
    "us-west-2": (
        ("us-west-2a", "usw2-az2"),
        ("us-west-2b", "usw2-az1"),
        ("us-west-2c", "usw2-az3"),
        ("us-west-2d", "usw2-az4"),
    ),
}
