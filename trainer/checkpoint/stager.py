"""Staging for async saves: the state is copied into CPU memory, then written in the background.

On a GPU the copy itself runs in the background too (DCP's DefaultStager with ``use_async_staging``, torch
2.13 torch/distributed/checkpoint/staging.py): ``dcp.async_save`` then returns an ``AsyncSaveResponse``
whose ``staging_completion`` the trainer waits for only before the next optimizer step.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions


class ReusableStager(DefaultStager):
    """DCP's DefaultStager, reused across saves while it can be (its pinned buffers stay warm).

    torch 2.11's DefaultStager closes its own StateDictStager at the end of every ``stage`` (which
    empties the copy table): a second save through it fails with ``KeyError: <class 'type'>``. Measured
    on an H100 with torch 2.11.0+cu130: the first async save committed, the next three failed and the run
    ended with 74. torch 2.13 no longer closes it. ``usable()`` tells the store when to take a new one.
    """

    def usable(self) -> bool:
        inner = getattr(self, "_state_dict_stager", None)
        return inner is None or bool(getattr(inner, "_deepcopy_dispatch", True))

    def stage(self, state_dict: Any, **kwargs: Any) -> Any:
        # Called on the training thread. DCP's staging stream does not wait for the compute stream by
        # itself: the copies must start after the kernels that wrote the state (the optimizer step
        # just queued) have run, so the staging stream waits for the current stream first.
        stream = getattr(self, "_staging_stream", None)
        if stream is not None:
            stream.wait_stream(torch.accelerator.current_stream())
        return super().stage(state_dict, **kwargs)

    @property
    def background(self) -> bool:
        """Whether ``stage`` returns at once (a Future) and copies in DCP's staging thread."""
        return bool(self._config.use_async_staging)


def default_stager(background: bool | None = None) -> ReusableStager:
    """DCP's stager for what ``_CpuStager`` does not handle (GPU tensors, DTensor, ShardedTensor).

    With CUDA: pinned, reused buffers, non-blocking copies on DCP's staging stream, in DCP's staging
    thread (``background``). Without: plain CPU buffers; ``background`` (tests) still stages in DCP's
    thread (DCP requires an accelerator only for non-blocking copies).
    """
    cuda = torch.cuda.is_available()
    return ReusableStager(
        StagingOptions(
            use_pinned_memory=cuda,
            use_shared_memory=False,
            use_async_staging=cuda if background is None else background,
            use_non_blocking_copy=cuda,
        )
    )


class _CpuStager:
    """Stages a state dict of plain CPU tensors into warm CPU buffers with a few long copies.

    DCP's DefaultStager copies tensor by tensor on the calling thread, and every copy is an OpenMP
    parallel region. Once a long-lived thread of the process has run one (gloo's worker threads do, for
    DCP's planning gathers), libgomp counts more threads than cores and stops spinning between regions,
    so each of the few hundred copies pays a thread wake-up: measured here, staging 254 MiB went from
    0.021 s to 0.040 s. This stager splits the tensors by bytes over a small pool of threads that copy
    serially (one intra-op thread each, GIL released during the copy), so the cost is a handful of
    wake-ups. Buffers are reused across saves (saves are serialised, so the previous save's writers are
    done with them) and are dropped when the state no longer contains their source.

    Only for dicts/lists/tuples of plain CPU tensors and Python scalars/bytes/strings; anything else
    (GPU tensors, DTensor, ShardedTensor) goes to DCP's DefaultStager.
    """

    _synchronize_after_execute = False
    _LEAVES = (int, float, bool, str, bytes, type(None))

    def __init__(self, threads: int | None = None) -> None:
        self._n = max(1, min(8, threads or torch.get_num_threads()))
        self._pool = ThreadPoolExecutor(self._n, thread_name_prefix="ckpt-stage", initializer=_one_thread)
        self._buffers: dict[tuple[int, int], torch.Tensor] = {}

    @property
    def should_synchronize_after_execute(self) -> bool:
        return False

    @classmethod
    def handles(cls, obj: Any) -> bool:
        if type(obj) is torch.Tensor:
            return obj.device.type == "cpu" and obj.layout == torch.strided and not obj.is_quantized
        if isinstance(obj, dict):
            return all(isinstance(k, (str, int)) and cls.handles(v) for k, v in obj.items())
        if isinstance(obj, (list, tuple)):
            return all(cls.handles(v) for v in obj)
        return isinstance(obj, cls._LEAVES)

    def stage(self, state_dict: dict[str, Any]) -> dict[str, Any]:
        plan = _StagingPlan(self._buffers)
        out = plan.walk(state_dict)
        self._buffers = plan.staged  # buffers whose source left the state are freed here
        shares: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in range(self._n)]
        load = [0] * self._n
        for dst, src, n in sorted(plan.copies, key=lambda c: -c[2]):
            i = load.index(min(load))
            shares[i].append((dst, src))
            load[i] += n
        for f in [self._pool.submit(_copy_all, part) for part in shares if part]:
            f.result()
        return out

    def synchronize_staging(self) -> None:
        pass

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._buffers = {}


class _StagingPlan:
    """One save's staging: the state with every tensor viewing a CPU buffer, and the copies to make."""

    def __init__(self, warm: dict[tuple[int, int], torch.Tensor]) -> None:
        self._warm = warm  # the previous save's buffers, by source storage
        self.staged: dict[tuple[int, int], torch.Tensor] = {}  # this save's storages: (data_ptr, nbytes)
        self.copies: list[tuple[torch.Tensor, torch.Tensor, int]] = []  # (dst bytes, src bytes, nbytes)

    def storage_of(self, t: torch.Tensor) -> torch.Tensor:
        src = t.untyped_storage()
        key = (src.data_ptr(), src.nbytes())
        buf = self.staged.get(key)
        if buf is None:
            buf = self._warm.get(key)
            if buf is None:
                buf = torch.empty(src.nbytes(), dtype=torch.uint8)
            self.staged[key] = buf
            whole = torch.empty(0, dtype=torch.uint8).set_(src)
            self.copies.append((buf, whole, src.nbytes()))
        return buf

    def walk(self, obj: Any) -> Any:
        if type(obj) is torch.Tensor:
            buf = self.storage_of(obj)
            out = torch.empty(0, dtype=obj.dtype)
            return out.set_(buf.untyped_storage(), obj.storage_offset(), obj.size(), obj.stride())
        if isinstance(obj, dict):
            return type(obj)((k, self.walk(v)) for k, v in obj.items())
        if isinstance(obj, list):
            return [self.walk(v) for v in obj]
        if isinstance(obj, tuple):
            return tuple(self.walk(v) for v in obj)
        return obj


def _one_thread() -> None:
    torch.set_num_threads(1)  # per thread under OpenMP: serial copies, no OpenMP team in this thread


@torch.no_grad()
def _copy_all(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    for dst, src in pairs:
        dst.copy_(src)
