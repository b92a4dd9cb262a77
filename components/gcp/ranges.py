"""The address ranges of a GCP network trainplane creates, where the stack names none.

Its own module (no imports) because three sides read them: the network component that makes the ranges
(network.py), and the spec rules that check a stack's ranges against each other (rules.py) and against
the GPUDirect fabric block (fabric_rules.py), which `rules.check` calls.
"""

from __future__ import annotations

import ipaddress

# Secondary and peering ranges of a GCP network trainplane creates, when the stack names none.
GCP_DEFAULT_PODS_CIDR = ipaddress.IPv4Network("10.64.0.0/14")
GCP_DEFAULT_SERVICES_CIDR = ipaddress.IPv4Network("10.68.0.0/20")
GCP_DEFAULT_PRIVATE_SERVICES_CIDR = ipaddress.IPv4Network("10.72.0.0/20")
