"""Dense bf16 peak FLOP/s of the exact GPU model a process runs on, and the MFU formula.

MFU = FLOPs per token x tokens trained in an interval / (the interval's wall seconds x peak x GPUs).

- FLOPs per token: 6N + 12 x layers x d_model x seq_len (PaLM, Chowdhery et al. 2022, appendix B; the
  estimate nanoGPT's `estimate_mfu` uses), `GPTConfig.flops_per_token` in trainer/model.py;
- the interval is wall time from one step's end to the next one's (trainer/reporting.py), so the data
  loading, the step's vote, checkpoint saves and logging between steps all count against it;
- peak: the dense (not "with sparsity") bf16 Tensor Core figure of the datasheet of the exact model,
  because one product name covers parts of very different speed: an H100 PCIe has 756 TFLOP/s, the SXM
  part 989. torch reports the part (`torch.cuda.get_device_name`: "NVIDIA H100 80GB HBM3" for the SXM
  part, "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA GB200", ...); a name matched by no row gets no
  MFU rather than a guess.

Example:
    >>> [gpu_peak(n).model for n in ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA GB200")]
    ['H100 SXM', 'H100 PCIe', 'GB200']
    >>> gpu_peak("NVIDIA H100 PCIe").tflops, gpu_peak("Tesla T4")
    (756.0, None)
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    model: str
    tflops: float  # dense bf16 Tensor Core TFLOP/s per GPU
    source: str

    @property
    def flops(self) -> float:
        return self.tflops * 1e12


# (pattern on the device name, upper case) -> peak. First match wins: the specific parts (PCIe, NVL, the
# Grace Blackwell superchips whose names contain "B200"/"B300") come before the family's SXM default.
# Datasheets give bf16 "with sparsity" (marked *): the dense figure is half of it.
_PEAKS: tuple[tuple[str, Peak], ...] = (
    (r"\bGB300\b", Peak("GB300", 2500, "NVIDIA GB300 NVL72 datasheet: FP16/BF16 360 PFLOPS* for 72 GPUs")),
    (r"\bGB200\b", Peak("GB200", 2500, "NVIDIA GB200 NVL72 datasheet: FP16/BF16 360 PFLOPS* for 72 GPUs")),
    (r"\bB300\b", Peak("B300", 2250, "NVIDIA HGX B300 datasheet: FP16/BF16 36 PFLOPS* for 8 GPUs")),
    (r"\bB200\b", Peak("B200", 2250, "NVIDIA HGX B200 datasheet: FP16/BF16 36 PFLOPS* for 8 GPUs")),
    (r"\bH200 NVL\b", Peak("H200 NVL", 835.5, "NVIDIA H200 datasheet: BF16 1,671 TFLOPS* (H200 NVL)")),
    (r"\bH200\b", Peak("H200 SXM", 989.5, "NVIDIA H200 datasheet: BF16 1,979 TFLOPS* (H200 SXM)")),
    (r"\bH100 NVL\b", Peak("H100 NVL", 835.5, "NVIDIA H100 datasheet: BF16 1,671 TFLOPS* (H100 NVL)")),
    (
        r"\bH100\b.*\bPCIE\b",
        Peak("H100 PCIe", 756.0, "NVIDIA H100 datasheet: BF16 1,513 TFLOPS* (H100 PCIe)"),
    ),
    (r"\bH100\b", Peak("H100 SXM", 989.5, "NVIDIA H100 datasheet: BF16 1,979 TFLOPS* (H100 SXM)")),
    (r"\bA100\b", Peak("A100", 312, "NVIDIA A100 datasheet: BF16 312 TFLOPS dense (SXM and PCIe)")),
    (r"\bL40S\b", Peak("L40S", 362.05, "NVIDIA L40S datasheet: BF16 362.05 TFLOPS dense")),
    (r"\bL4\b", Peak("L4", 121, "NVIDIA L4 datasheet: BF16 242 TFLOPS*")),
    (
        r"\bA10G\b",
        Peak("A10G", 125, "NVIDIA A10 datasheet: BF16 125 TFLOPS dense (no A10G figure published)"),
    ),
)


def gpu_peak(device_name: str) -> Peak | None:
    """The peak of the GPU `torch.cuda.get_device_name` names; None for a part not in the table."""
    name = device_name.upper()
    return next((peak for pattern, peak in _PEAKS if re.search(pattern, name)), None)
