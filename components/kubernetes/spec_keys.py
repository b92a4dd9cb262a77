"""The existing cluster's section of the platform spec (`cloud: kubernetes`): the keys only it
understands, composed into the cloud-neutral models when they load (components/spec/sections.py). Pure
pydantic: no backend, no rules, no pulumi. Which of these it accepts is its rules' `KEYS`
(components/kubernetes/rules.py)."""

from __future__ import annotations

from pydantic import Field

from components.spec.base import ABSOLUTE_PATH, API_SERVER, DNS_SUBDOMAIN, Spec


class ClusterKeys(Spec):
    # The kubeconfig itself is the secret `trainplane:kubeconfig`.
    context: str | None = None
    # The API server's https URL as other clusters reach it (exported as `apiServer`); a fleet manager
    # needs it for a worker that exports no kubeconfig document (the ambient kubeconfig).
    api_server: str | None = Field(default=None, pattern=API_SERVER, max_length=253)
    # The StorageClass the platform's volumes (Prometheus, Loki) name; None: the cluster's default class
    # (`trainplane verify --kubeconfig` checks that one exists).
    storage_class: str | None = Field(default=None, pattern=DNS_SUBDOMAIN, max_length=253)


class NodePoolKeys(Spec):
    # The labels that select nodes that already exist.
    selector: dict[str, str] = Field(default_factory=dict)
    # The node labels of the cluster's network topology, broadest first, ending with
    # kubernetes.io/hostname (Kueue topology-aware placement); the clouds know their own.
    topology_levels: list[str] = Field(default_factory=list, max_length=8)


class StorageKeys(Spec):
    # nfs: an NFS server that already exists
    server: str | None = None
    path: str | None = Field(default=None, pattern=ABSOLUTE_PATH)
    mount_options: list[str] = Field(default_factory=list)
