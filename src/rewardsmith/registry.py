"""One registry per pluggable family, keyed by the name used in configs and on the command line."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from rewardsmith.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> object map with a decorator to fill it and an error that lists the known names.

    >>> LOSSES: Registry[Callable] = Registry("loss")
    >>> @LOSSES.register("bt")
    ... def bt_loss(...): ...
    """

    def __init__(self, family: str):
        self.family = family
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def add(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.family} {name!r} registered twice")
            self._items[name] = obj
            return obj

        return add

    def add(self, name: str, obj: T) -> None:
        self.register(name)(obj)

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.family, name, list(self._items)) from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
