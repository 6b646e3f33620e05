"""Transports: in-memory pair, own stdio (servers), subprocess (clients)."""

from .base import Transport
from .memory import MemoryTransport, memory_pair
from .stdio import StdioTransport
from .subprocess import SubprocessTransport

__all__ = ["Transport", "MemoryTransport", "memory_pair", "StdioTransport", "SubprocessTransport"]
