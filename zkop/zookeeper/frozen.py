"""A cheaper ``__init__`` for the frozen dataclasses built once or more per reconcile.

``@dataclass(frozen=True)`` generates an ``__init__`` that sets each field through
``object.__setattr__`` (CPython ``Lib/dataclasses.py``, ``_field_assign``). :func:`fast_init`
replaces it with one that stores the same values, in the same order, straight into the instance
``__dict__`` (where ``object.__setattr__`` ends for a class without slots or data descriptors):
the same object, built for less. Everything else the dataclass generated is left as it is.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["fast_init", "fast_replace"]

_T = TypeVar("_T")

#: Stands for "not passed" in the signature of a field with a ``default_factory`` (as dataclasses does).
_FACTORY = object()


def fast_init(cls: type[_T]) -> type[_T]:
    """Class decorator, applied over ``@dataclass(frozen=True)``: an ``__init__`` writing the instance dict.

    The new ``__init__`` takes the same parameters (names, order, defaults, default factories)
    and leaves the instance in the same state as the generated one.

    Args:
        cls: a frozen dataclass without slots, ``__post_init__``, ``InitVar``, ``init=False`` or
            keyword-only fields, and without a base class that defines fields.

    Returns:
        ``cls``, its ``__init__`` replaced.

    Raises:
        TypeError: ``cls`` is not such a dataclass (at import time, so a later change to the
            class cannot silently lose behaviour of the generated ``__init__``).
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or not params.init:
        raise TypeError(f"{cls.__name__}: fast_init needs a frozen dataclass with a generated __init__")
    if "__slots__" in cls.__dict__ or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: fast_init does not support slots or __post_init__")
    if any(dataclasses.is_dataclass(base) for base in cls.__mro__[1:]):
        raise TypeError(f"{cls.__name__}: fast_init does not support inherited fields")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    generated = cls.__dict__["__init__"]
    code = generated.__code__
    # The generated __init__ takes exactly the fields, positionally: no InitVar, init=False or kw_only field.
    if code.co_kwonlyargcount or list(code.co_varnames[1:code.co_argcount]) != [f.name for f in fields]:
        raise TypeError(f"{cls.__name__}: fast_init does not support InitVar, init=False or kw_only fields")
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    parameters: list[str] = []
    body = ["    _d = _self.__dict__"]
    for f in fields:
        if f.name in ("_self", "_d", "_FACTORY") or f.name.startswith("_dflt_"):
            raise TypeError(f"{cls.__name__}: field name {f.name!r} is reserved by fast_init")
        if f.default is not dataclasses.MISSING:
            namespace[f"_dflt_{f.name}"] = f.default
            parameters.append(f"{f.name}=_dflt_{f.name}")
            body.append(f"    _d[{f.name!r}] = {f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_dflt_{f.name}"] = f.default_factory
            parameters.append(f"{f.name}=_FACTORY")
            body.append(f"    _d[{f.name!r}] = _dflt_{f.name}() if {f.name} is _FACTORY else {f.name}")
        else:
            parameters.append(f.name)
            body.append(f"    _d[{f.name!r}] = {f.name}")
    source = f"def __init__(_self, {', '.join(parameters)}):\n" + "\n".join(body) + "\n"
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = generated.__qualname__
    init.__module__ = cls.__module__
    init.__annotations__ = dict(generated.__annotations__)
    init.__doc__ = generated.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    cls.__fast_init__ = True  # type: ignore[attr-defined]
    return cls


def fast_replace(obj: _T, /, **changes: Any) -> _T:
    """``dataclasses.replace(obj, **changes)`` for a :func:`fast_init` class, by copying the instance dict.

    ``replace`` calls ``__init__`` with every field; for a :func:`fast_init` class (whose checks
    guarantee the instance dict holds exactly the fields, and that nothing runs after them) copying
    that dict and updating it builds the same object for a fraction of the cost.

    Raises:
        TypeError: ``obj``'s class is not decorated with :func:`fast_init`, or a name in ``changes``
            is not a field (as ``replace`` does).
    """
    cls = type(obj)
    if not cls.__dict__.get("__fast_init__", False):
        raise TypeError(f"{cls.__name__}: fast_replace needs a class decorated with fast_init")
    values = obj.__dict__
    unknown = changes.keys() - values.keys()
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
    new = object.__new__(cls)
    new.__dict__.update(values)
    new.__dict__.update(changes)
    return new
