"""The process-wide handler registry, with the built-ins registered."""

from shared.handlers.builtin import register_builtins
from shared.handlers.registry import HandlerContext, HandlerError, HandlerRegistry

registry = HandlerRegistry()
register_builtins(registry)

__all__ = ["HandlerContext", "HandlerError", "HandlerRegistry", "registry"]
