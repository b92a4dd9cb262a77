"""`trainplane gpus`: the GPU catalog as a user reads it (a table that survives a pipe) and as scripts read
it (--json), with its filters and their one-line errors."""

from __future__ import annotations

import json

import pytest

from components.catalog import catalog
from tests.helpers.cli import _bad_keys, cli

TODAY = {"TRAINPLANE_TODAY": "2026-11-28"}
KEYS = [
    "gpu",
    "cloud",
    "machine",
    "gpusPerNode",
    "gpuMemoryGiB",
    "peakBf16Tflops",
    "peakFp8Tflops",
    "vcpus",
    "memoryGiB",
    "arch",
    "efaInterfaces",
    "gpuNics",
    "nvlinkDomain",
    "localNvmeGB",
    "onDemandHourly",
    "onDemandHourlyPerGpu",
    "capacityBlockHourly",
    "priceAsOf",
    "priceRegion",
    "priceSource",
    "capacityKinds",
    "capacityBlockOnly",
    "unverified",
]


def _json(*args: str) -> list[dict]:
    proc = cli("gpus", "--json", *args, env=TODAY)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _row(rows: list[dict], machine: str) -> dict:
    return next(r for r in rows if r["machine"] == machine)


def test_json_lists_every_catalog_gpu_machine_with_stable_camel_case_keys():
    rows = _json()
    cat = catalog()
    expected = [(g, m.name) for g in cat.gpu_names() for ms in cat.gpu(g).on.values() for m in ms]  # type: ignore[union-attr]
    assert sorted((r["gpu"], r["machine"]) for r in rows) == sorted(expected)
    assert all(list(r) == KEYS for r in rows)
    assert _bad_keys(rows) == []
    assert rows == _json()  # deterministic


def test_json_values_come_from_the_catalog_and_the_backends():
    rows = _json()
    p5 = _row(rows, "p5.48xlarge")
    assert (p5["gpusPerNode"], p5["gpuMemoryGiB"], p5["efaInterfaces"], p5["nvlinkDomain"]) == (
        8,
        80.0,
        32,
        8,
    )
    assert (p5["onDemandHourly"], p5["onDemandHourlyPerGpu"]) == (55.04, 6.88)
    assert (p5["priceAsOf"], p5["priceRegion"]) == ("2026-07-20", "us-east-1")
    assert p5["capacityKinds"] == ["on-demand", "spot", "reservation", "capacity-block"]
    mega = _row(rows, "a3-megagpu-8g")
    assert (mega["gpuNics"], mega["efaInterfaces"], mega["localNvmeGB"]) == (8, 0, 6000)
    assert mega["capacityKinds"] == ["on-demand", "spot", "reservation", "flex-start", "queued"]
    # Sold only as Capacity Blocks (catalog capacityBlockOnly): the one kind a pool of it may have.
    # EC2 sells Capacity Blocks of some types only (components/aws/capacity_blocks.py): not of g5.
    assert _row(rows, "g5.48xlarge")["capacityKinds"] == ["on-demand", "spot", "reservation"]
    gb200 = _row(rows, "p6e-gb200.36xlarge")
    assert gb200["capacityKinds"] == ["capacity-block"] and gb200["capacityBlockOnly"] is True
    assert gb200["onDemandHourly"] is None and gb200["priceAsOf"] is None
    assert gb200["unverified"] == ["efaInterfaces", "localNvmeGB"]
    assert _row(rows, "g5.xlarge")["peakFp8Tflops"] is None


def test_table_has_every_column_and_footnotes_what_a_dash_means():
    proc = cli("gpus", "--gpu", "GB200", env=TODAY)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for header in ("GPU", "machine", "GPUs/node", "interconnect", "local NVMe", "on-demand $/h", "$/GPU-h"):
        assert header in out
    assert "…" not in out
    line = next(x for x in out.splitlines() if "p6e-gb200.36xlarge" in x)
    cells = [c.strip() for c in line.split("│")]
    assert cells[8:11] == ["-", "-", "-"]
    assert "4 EFA, NVLink 72 GPUs" in cells and "capacity-block" in cells
    assert "sold only as Capacity Blocks; arm64; unverified: efaInterfaces, localNvmeGB" in cells
    assert any(x.startswith("-: no list price in the catalog") for x in out.splitlines())


def test_header_gives_the_prices_date_and_warns_past_six_months():
    old = cli("gpus", "--gpu", "H100", env={"TRAINPLANE_TODAY": "2027-03-01"}).stdout.splitlines()
    assert old[1].startswith("prices: aws on-demand list prices in USD, us-east-1, as of 2026-07-20")
    assert any(x.startswith("warning: prices are 7 months old (as of 2026-07-20") for x in old)
    fresh = cli("gpus", "--gpu", "H100", env=TODAY).stdout
    assert "warning: prices" not in fresh


def test_filters_by_cloud_gpu_and_region():
    assert {r["cloud"] for r in _json("--cloud", "gcp")} == {"gcp"}
    assert {(r["gpu"], r["cloud"]) for r in _json("--gpu", "h100")} == {("H100", "aws"), ("H100", "gcp")}
    assert {r["cloud"] for r in _json("--region", "europe-west4", "--gpu", "B200")} == {"gcp"}
    text = cli("gpus", "--region", "eu-west-1", "--gpu", "B200", env=TODAY).stdout
    assert "--region eu-west-1: the catalog keeps no per-region offerings or prices" in text
    assert "the prices are us-east-1's" in text


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--gpu", "H1000"],
            "--gpu H1000: not a GPU of the catalog; did you mean 'H100'? (known: A10G, L4, L40S, ",
        ),
        (["--gpu", "A10G", "--cloud", "gcp"], "--gpu A10G: no machine of gcp carries it; it is on aws"),
        (["--cloud", "azure"], "--cloud azure: not a cloud with a GPU catalog; known: aws, gcp"),
        (
            ["--region", "europe-wset4"],
            "--region europe-wset4: not a region of aws or gcp; did you mean 'europe-west4'?",
        ),
        (
            ["--cloud", "gcp", "--region", "us-east-1"],
            "--region: 'us-east-1' is not a GCP region (it is an AWS region)",
        ),
    ],
)
def test_unknown_names_are_one_line_and_exit_2(args, line):
    proc = cli("gpus", *args, env=TODAY)
    assert proc.returncode == 2 and proc.stdout == ""
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(line), err


def test_help_prints_the_exit_code_table():
    from infra.cli import EXIT_CODES, build_parser

    gpus = build_parser()._subparsers._group_actions[0].choices["gpus"]  # type: ignore[union-attr]
    assert EXIT_CODES in gpus.format_help()


def test_docs_cli_md_names_every_json_key():
    from tests.helpers.plans import ROOT

    doc = (ROOT / "docs" / "cli.md").read_text()
    assert "## `trainplane gpus`" in doc
    for key in KEYS:
        assert f"`{key}`" in doc, key
