"""One registry per pluggable family, keyed by the name used in configs and on the command line."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Collection, Iterator
from typing import Any, Generic, Protocol, TypeVar

from rewardsmith.errors import UnknownNameError

T = TypeVar("T")


class Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=Named)


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


def discover(package: str, attribute: str, kind: type[N], *, shared: Collection[str] = ()) -> dict[str, N]:
    """name -> the module-level `attribute` (an instance of `kind` with a `name`) of every module of `package`, in
    name order; modules whose name starts with "_" are skipped, and so are the modules named in `shared` (the
    package's code shared by its extensions, e.g. the ICRM protocols' context.py). An extension is one new module;
    nothing registers on import. TypeError / ValueError for a module without the attribute or two of one name (bugs
    in the package)."""
    root = importlib.import_module(package)
    found: dict[str, N] = {}
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name in shared:
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        value: Any = getattr(module, attribute, None)
        if not isinstance(value, kind):
            raise TypeError(f"{module.__name__} has no module-level {attribute} of type {kind.__name__}")
        name = value.name
        if name in found:
            raise ValueError(f"{kind.__name__} {name!r} defined twice ({module.__name__})")
        found[name] = value
    return found
