"""The offline engine's zone data is moto's (tests/unit/components/aws/test_mock_zones.py has the rest)."""

from __future__ import annotations

import pytest

from components.aws.mock_zones import MOTO_VERSION, ZONES


def test_zone_data_is_motos():
    moto = pytest.importorskip("moto")
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    assert moto.__version__ == MOTO_VERSION
    assert {
        r: tuple((z.name, z.zone_id) for z in zs) for r, zs in RegionsAndZonesBackend.zones.items()
    } == ZONES
