"""`CatalogBackend`: what the backends of clouds that sell machines share (their pools are made of
catalog machines, their keys and rules live in their package's `rules` module, their machines, prices,
regions and support calendar in their package's data files)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from components.catalog import CatalogSection, MachineShape, PriceBasis
    from components.spec import NodePoolSpec, PlatformSpec, Spec, StorageSpec
    from components.spec.capacity import CapacityKinds


from components.backend_defaults import BackendDefaults
from components.backend_protocol import Prompt
from components.backends import load_data_file


class CatalogBackend(BackendDefaults):
    """What the AWS and GCP backends share: their keys and rules in their package's `rules` module, pools
    made of catalog machines, regions from a list. A
    subclass names its cloud, rules module, grace, the key that names a pool's machine, its
    object store and quickstart defaults, and builds."""

    name: str
    title: str  # the cloud's name in prose ("AWS")
    rules: ModuleType  # KEYS, TWINS, CAPACITY, check, check_pool, check_storage
    keys: Mapping[type[Spec], frozenset[str]]
    twins: Mapping[str, str]
    preemption_grace_seconds: int
    # The pool key that names a machine, which also names each machine of the cloud's catalog section.
    machine_key: str
    object_store: str  # the scheme of its object store
    # Quickstart: the CPU pool that runs the operators, Prometheus and Kueue; the region when none is given.
    system_pool: Mapping[str, Any]
    default_region: str
    # Each cloud keeps its data in its own package (the backend module's), composed with the other
    # clouds' when loaded: its machines and prices (the GPU kinds are components/data/gpus.yaml), its
    # regions and its section of the Kubernetes support calendar.
    CATALOG_FILE = "data/catalog.yaml"
    REGIONS_FILE = "data/regions.yaml"
    SUPPORT_FILE = "data/k8s_support.yaml"

    @property
    def package(self) -> str:
        """The backend's package, where its data files are (components.aws)."""
        return type(self).__module__.rpartition(".")[0]

    def check(self, spec: PlatformSpec, root: str) -> Iterable[str]:
        return self.rules.check(spec, root)

    def check_pool(self, spec: PlatformSpec, pool: NodePoolSpec, path: str) -> Iterable[str]:
        return self.rules.check_pool(spec, pool, path)

    def check_storage(self, spec: PlatformSpec, storage: StorageSpec, path: str) -> Iterable[str]:
        return self.rules.check_storage(spec, storage, path)

    def machine_type_of(self, pool: NodePoolSpec) -> str | None:
        """The machine the pool's config names under `machine_key` (`instanceType`...), if any."""
        fields = type(pool).model_fields
        return next(getattr(pool, f) for f, info in fields.items() if (info.alias or f) == self.machine_key)

    def machine_of(self, pool: NodePoolSpec) -> MachineShape | None:
        """The pool's named machine, else the cheapest one carrying its GPUs."""
        from components.catalog import catalog

        named = self.machine_type_of(pool)
        if named:
            return catalog().machine(self.name, named)
        if pool.gpu and pool.gpus_per_node:
            shapes = catalog().shapes(self.name, pool.gpu, pool.gpus_per_node)
            return shapes[0] if shapes else None
        return None

    # catalog, spec keys, regions, quickstart (b1)
    @cache  # noqa: B019
    def catalog_section(self) -> CatalogSection | None:
        from components.catalog import CatalogSection

        return CatalogSection.of_doc(
            load_data_file(self.package, self.CATALOG_FILE), self.name, self.machine_key
        )

    def display_name(self) -> str:
        return self.title

    @cache  # noqa: B019
    def regions(self) -> Sequence[str]:
        return sorted(load_data_file(self.package, self.REGIONS_FILE).get("regions") or [])

    @cache  # noqa: B019
    def support_section(self) -> Mapping[str, Any] | None:
        return load_data_file(self.package, self.SUPPORT_FILE) if self.support_calendar else None

    def support_file(self) -> str | None:
        return f"{self.package.replace('.', '/')}/{self.SUPPORT_FILE}" if self.support_calendar else None

    def capacity_kinds(self) -> CapacityKinds:
        return self.rules.CAPACITY

    def object_store_scheme(self) -> str | None:
        return self.object_store

    def quickstart(self, get: Prompt, gpu_pool: dict[str, Any]) -> dict[str, Any]:
        """A CPU system pool beside the GPU pool, which takes spot capacity unless told otherwise."""
        from components.quickstart import prompt_bool

        pool = {**gpu_pool, "capacity": "spot" if prompt_bool(get("spot"), True) else "on-demand"}
        return {"region": get("region") or self.default_region, "nodePools": [dict(self.system_pool), pool]}

    def price_basis(self) -> PriceBasis | None:
        """The catalog's list prices for this cloud (its data/catalog.yaml `pricing`)."""
        from components.catalog import catalog

        return catalog().pricing.get(self.name)
