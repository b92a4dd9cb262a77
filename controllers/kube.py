"""The controllers' own Kubernetes calls, through the official `kubernetes` client (pyproject's pin).

The decisions (node_reconcile, idle_round, block_window_agent) name each call by method and API path, as
the API reference does, and the tests fake exactly that seam (`request`). `Kube.request` hands it to the
client's ApiClient.call_api, the same call its typed APIs (CoreV1Api.patch_node, CustomObjectsApi) make:
the client does the transport, TLS, the bearer token (re-read as it rotates: load_incluster_config's
refresh hook) and raises kubernetes.client.ApiException with the HTTP status on a refusal.
"""

from __future__ import annotations

from typing import Any

import urllib3
from kubernetes import client, config

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# Every status a call answers with a body is read as plain JSON ("object": the client's json.loads).
# A call that did not succeed: refused (ApiException, with .status), or no answer (urllib3's errors after
# its retries; OSError for the token or CA file).
CALL_FAILED: tuple[type[Exception], ...] = (client.ApiException, urllib3.exceptions.HTTPError, OSError)
_JSON = {status: "object" for status in (200, 201, 202)}


class Kube:
    """The client the controllers make their own requests with."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client

    @classmethod
    def from_environment(cls, api_url: str | None = None, kubeconfig: str | None = None) -> Kube:
        """In a pod its service account (KUBERNETES_SERVICE_HOST and the token file), else the kubeconfig
        (`kubeconfig`, else KUBECONFIG or ~/.kube/config: tests, a laptop); `api_url` (the agents'
        --api-url) replaces the server's address (without a kubeconfig: no credentials)."""
        configuration = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException:
            if api_url is None or kubeconfig is not None:
                config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        if api_url is not None:
            configuration.host = api_url.rstrip("/")
        return cls(client.ApiClient(configuration))

    def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        return self.api_client.call_api(
            path,
            method,
            header_params=headers,
            body=body,
            response_types_map=_JSON,
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
            _request_timeout=30,
        )
