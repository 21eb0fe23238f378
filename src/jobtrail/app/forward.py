"""``forward``: how ``App`` hands a public method to the part that owns it. ``App.enqueue`` is
``forward("_enqueue", Enqueue.enqueue)``: on the class it is the part's own function (its
signature and docstring, for ``help()`` and ``inspect``), on an instance the part's bound
method — looked up once, then kept in the instance's dict, so a call costs what a method call
costs (and a test may still replace ``app.enqueue`` on its instance)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

S = TypeVar("S")
P = ParamSpec("P")
R = TypeVar("R")


class forward(Generic[S, P, R]):
    """``fn`` (a method of the part held in the attribute ``part``) as a method of ``App``."""

    def __init__(self, part: str, fn: Callable[Concatenate[S, P], R]) -> None:
        self.part = part
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        if name != self.name:
            raise TypeError(f"{owner.__name__}.{name} forwards {self.name}: name them alike")

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Callable[Concatenate[S, P], R]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, R]: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        if obj is None:
            return self.fn
        bound = getattr(getattr(obj, self.part), self.name)
        obj.__dict__[self.name] = bound
        return bound
