"""A registry of kinds (sources of items, sources of changes): each kind registers a test and a factory, and the
newest registration whose test holds makes the one a run uses, so a kind registered later (a new module, a test)
can claim what the built-in ones would take. Used by :mod:`.sources` and :mod:`.change_sources`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Registration(Generic[T]):
    kind: type[T]
    matches: Callable[..., bool]
    make: Callable[..., T]


class Registry(Generic[T]):
    def __init__(self, kinds: tuple[type[T], ...] = ()) -> None:
        self.registrations: list[Registration[T]] = []
        self.kinds: list[type[T]] = list(kinds)
        """Every kind, the ones made directly by their use case (registered with no test) included."""

    def register(self, kind: type[T], matches: Callable[..., bool], make: Callable[..., T]) -> Registration[T]:
        """Make ``kind`` the choice for what ``matches``, made by ``make`` (both given the same arguments as
        :meth:`choose`). Returns the registration, for :meth:`unregister`."""
        registration = Registration(kind, matches, make)
        self.registrations.append(registration)
        if kind not in self.kinds:
            self.kinds.append(kind)
        return registration

    def unregister(self, registration: Registration[T]) -> None:
        self.registrations.remove(registration)
        if all(other.kind is not registration.kind for other in self.registrations):
            self.kinds.remove(registration.kind)

    def choose(self, *args: Any) -> T | None:
        """What the newest registration whose test holds for ``args`` makes of them; None when none does."""
        for registration in reversed(self.registrations):
            if registration.matches(*args):
                return registration.make(*args)
        return None
