"""ASPERA's own protocol: its checkout located (:mod:`primsel.aspera.source`) and its agents' requests rendered by
its code (:mod:`primsel.aspera.protocol`, in the worker process of :mod:`primsel.aspera.worker`).

Layer 2 (data and services): the generators and the ASPERA selector of layer 3 build on it.
"""

from primsel.aspera.protocol import ASPERA_DEFAULTS, DEFAULT_EXAMPLES, AsperaProtocol, aspera_endpoint, aspera_protocol
from primsel.aspera.source import ENV_VAR, AsperaSourceError, locate

__all__ = ["ASPERA_DEFAULTS", "DEFAULT_EXAMPLES", "aspera_endpoint", "ENV_VAR", "AsperaProtocol", "AsperaSourceError", "aspera_protocol", "locate"]
