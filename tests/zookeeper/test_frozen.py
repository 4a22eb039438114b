"""fast_init builds the same frozen dataclass instance as the generated ``__init__``."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from zkop.zkconfig.decide import Decision, Event
from zkop.zookeeper.actions import AclEntry, CreateNode
from zkop.zookeeper.frozen import fast_init, fast_replace


@dataclass(frozen=True)
class Plain:
    a: int
    b: str = "b"
    c: tuple[int, ...] = field(default=())
    d: list[int] = field(default_factory=list)
    tag: ClassVar[str] = "class"


@fast_init
@dataclass(frozen=True)
class Fast:
    a: int
    b: str = "b"
    c: tuple[int, ...] = field(default=())
    d: list[int] = field(default_factory=list)
    tag: ClassVar[str] = "class"


@pytest.mark.parametrize(("args", "kwargs"), [
    ((1,), {}),
    ((1, "x"), {}),
    ((1,), {"c": (2, 3), "d": [4]}),
    ((), {"a": 5, "b": "y", "c": (), "d": []}),
])
def test_same_state_as_the_generated_init(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    plain, fast = Plain(*args, **kwargs), Fast(*args, **kwargs)  # type: ignore[arg-type]
    assert vars(fast) == vars(plain)
    assert list(vars(fast)) == list(vars(plain))
    assert dataclasses.astuple(fast) == dataclasses.astuple(plain)
    assert repr(fast).replace("Fast", "Plain") == repr(plain)


def test_a_default_factory_runs_per_instance_and_not_when_passed() -> None:
    first, second = Fast(1), Fast(2)
    assert first.d == [] and first.d is not second.d
    given = [7]
    assert Fast(1, d=given).d is given


def test_still_frozen_hashable_comparable_and_replaceable() -> None:
    value = Fast(1, "x", (2,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.a = 2  # type: ignore[misc]
    assert value == Fast(1, "x", (2,)) and value != Fast(2, "x", (2,))
    assert dataclasses.replace(value, a=3) == Fast(3, "x", (2,))
    assert pickle.loads(pickle.dumps(value)) == value
    assert hash(Event("Normal", "Created", "m")) == hash(Event("Normal", "Created", "m"))


def test_the_argument_errors_of_the_generated_init() -> None:
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'a'"):
        Fast()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'e'"):
        Fast(1, e=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="takes from 2 to 5 positional arguments but 6 were given"):
        Fast(1, "b", (), [], 5)  # type: ignore[call-arg]


def test_zkops_values_are_built_by_it() -> None:
    assert Decision.__init__.__code__.co_varnames[0] == "_self"
    assert Decision() == Decision(False, None)
    assert sorted([AclEntry("world", "anyone", 31), AclEntry("digest", "x", 1)])[0] == AclEntry("digest", "x", 1)
    assert CreateNode("/a", b"x", ()).path == "/a"


def test_what_it_cannot_copy_is_refused_at_decoration() -> None:
    with pytest.raises(TypeError, match="frozen dataclass"):
        fast_init(dataclass(type("Mutable", (), {"__annotations__": {"a": int}})))

    @dataclass(frozen=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            pass

    with pytest.raises(TypeError, match="__post_init__"):
        fast_init(Post)

    @dataclass(frozen=True)
    class Hidden:
        a: int
        b: int = field(default=0, init=False)

    with pytest.raises(TypeError, match="init=False"):
        fast_init(Hidden)

    @dataclass(frozen=True)
    class Child(Plain):
        e: int = 0

    with pytest.raises(TypeError, match="inherited"):
        fast_init(Child)


def test_fast_replace_is_replace_and_refuses_a_class_without_fast_init() -> None:
    value = Fast(1, "x", (2,), [3])
    assert fast_replace(value, b="y") == dataclasses.replace(value, b="y") == Fast(1, "y", (2,), [3])
    assert value == Fast(1, "x", (2,), [3])
    with pytest.raises(TypeError, match="no field nope"):
        fast_replace(value, nope=1)
    with pytest.raises(TypeError, match="decorated with fast_init"):
        fast_replace(Plain(1), b="y")
