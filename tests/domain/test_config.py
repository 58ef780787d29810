import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.config import (
    parse_overrides,
    parse_value,
    registered_types,
    resolve,
    structure,
    tagged_union,
    unstructure,
)
from rlctl.domain.errors import ConfigError


@tagged_union
@attrs.frozen
class ShapeConfig:
    pass


@ShapeConfig.register("box")
@attrs.frozen
class Box(ShapeConfig):
    size: int = 1
    tags: tuple[str, ...] = ()


@ShapeConfig.register("ball")
@attrs.frozen
class Ball(ShapeConfig):
    radius: float = 0.5


@attrs.frozen
class Scene:
    shape: ShapeConfig = attrs.field(factory=Box)
    steps: int = 10
    name: str = "scene"


def test_registry_lists_types_in_order():
    assert list(registered_types(ShapeConfig)) == ["box", "ball"]


@given(st.integers(-5, 5), st.lists(st.text(max_size=4), max_size=3), st.integers(0, 100))
def test_round_trip_through_plain_data(size, tags, steps):
    scene = Scene(shape=Box(size=size, tags=tuple(tags)), steps=steps)
    data = unstructure(scene)
    assert data["shape"]["type"] == "box"
    assert structure(data, Scene) == scene


def test_overrides_switch_union_member_and_drop_old_keys():
    base = unstructure(Scene(shape=Box(size=3)))
    scene = resolve(Scene, base, overrides=parse_overrides(["--shape.type=ball", "--steps", "7"]))
    assert scene == Scene(shape=Ball(), steps=7)


def test_file_layer_then_overrides_win():
    scene = resolve(
        Scene,
        unstructure(Scene()),
        {"shape": {"type": "box", "size": 4}, "name": "from-file"},
        overrides=[("shape.size", 9)],
    )
    assert scene == Scene(shape=Box(size=9), name="from-file")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--shape.type=cone"], "known types: box, ball"),
        (["--shape.sise=3"], "sise"),
        (["--steps=many"], "steps"),
        (["--colour=red"], "colour"),
    ],
)
def test_bad_overrides_say_what_and_where(args, fragment):
    with pytest.raises(ConfigError) as info:
        resolve(Scene, unstructure(Scene()), overrides=parse_overrides(args))
    assert fragment in str(info.value) + (info.value.hint or "")


def test_values_parse_like_a_user_expects():
    assert parse_value("50") == 50
    assert parse_value("1e-4") == 1e-4
    assert parse_value("true") is True
    assert parse_value('["gripper"]') == ["gripper"]
    assert parse_value("act") == "act"
    assert parse_value("null") is None


def test_positional_garbage_is_rejected():
    with pytest.raises(ConfigError, match="cannot read"):
        parse_overrides(["stray"])
