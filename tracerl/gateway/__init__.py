"""The OpenAI-compatible gateway that serves the policy and records token-level spans."""

from .server import GatewayServer, check_bind

__all__ = ["GatewayServer", "check_bind"]
