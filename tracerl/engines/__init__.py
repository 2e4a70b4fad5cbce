"""Policy serving engines behind one interface (see :mod:`.base`); heavy imports are lazy."""

from .base import Engine, Generation, SamplingParams

__all__ = ["Engine", "Generation", "SamplingParams"]
