"""The guard: the one decision every integration and ``loopfuse scan`` run on a request.

:class:`Guard` runs the breaker, then the detector, then what the mode makes of a loop,
then the cache plan, on one parse of a request body, and returns a
:class:`GuardDecision` (forward, refuse, or forward with a note for the model). The
integrations (:mod:`loopfuse.integrations`) only translate that decision into their
framework's terms.

==========================================  ==========================================
module                                      what
==========================================  ==========================================
:mod:`loopfuse.guard.guard`                 :class:`Guard`, :class:`GuardDecision` and
                                            the decision's small types
:mod:`loopfuse.guard.request`               :class:`RequestContext` (what the caller
                                            knows about a request), the parse into a
                                            :class:`PreparedRequest`
:mod:`loopfuse.guard.memory`                what the guard remembers between requests:
                                            failed attempts, warn-mode notes
:mod:`loopfuse.guard.cache_plan`            ``Cache-Control``, namespaces, the cache
                                            plan and its scoped keys
==========================================  ==========================================

Their small types (``Mode``, ``CacheUse``, ``Attempt``, ``GuardOptions``) live in
their modules; :class:`GuardSettings` is every setting of a :class:`Guard`. In one step
(:meth:`Guard.check`) or two (:meth:`Guard.prepare`, then :meth:`Guard.decide`, which
``loopfuse scan`` uses to hand over the verdicts of its replay):

>>> from loopfuse import Guard, RequestContext
>>> guard = Guard(mode="warn")
>>> body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
>>> guard.check(body, RequestContext(path="/v1/chat/completions")).action
'forward'
>>> guard.decide(guard.prepare(body)).action
'forward'
"""

from __future__ import annotations

from loopfuse.guard.guard import (
    DEFAULT,
    Guard,
    GuardDecision,
    GuardSettings,
    Scanner,
    ScanVerdict,
)
from loopfuse.guard.request import PreparedRequest, RequestContext

__all__ = [
    "DEFAULT",
    "Guard",
    "GuardDecision",
    "GuardSettings",
    "PreparedRequest",
    "RequestContext",
    "ScanVerdict",
    "Scanner",
]


def __dir__() -> list[str]:
    """What ``dir()`` shows: the public API, not the imports and helpers."""
    from loopfuse._api import public_dir

    return public_dir(globals())
