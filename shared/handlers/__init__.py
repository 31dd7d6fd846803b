"""The process-wide handler registry, with the built-ins registered.

A handler module: `from shared.handlers import registry` and `@registry.register("send-email")`.
"""

from shared.backoff import Backoff
from shared.handlers.builtin import register_builtins
from shared.handlers.registry import HandlerContext, HandlerError, HandlerRegistry, Payload

registry = HandlerRegistry()
register_builtins(registry)

__all__ = ["Backoff", "HandlerContext", "HandlerError", "HandlerRegistry", "Payload", "registry"]
