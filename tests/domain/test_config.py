import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.config import (
    parse_bool,
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


# --- values mean what the user wrote --------------------------------------------------------

TRUE_WORDS = ["true", "yes", "on", "1"]
FALSE_WORDS = ["false", "no", "off", "0"]


@tagged_union
@attrs.frozen
class LightConfig:
    pass


@LightConfig.register("lamp")
@attrs.frozen
class Lamp(LightConfig):
    lit: bool = True


@attrs.frozen
class Switches:
    push: bool = False
    maybe: bool | None = None
    many: list[bool] = attrs.field(factory=list)
    shape: LightConfig = attrs.field(factory=Lamp)


def any_case(word: str):
    return st.lists(st.booleans(), min_size=len(word), max_size=len(word)).map(
        lambda ups: "".join(c.upper() if up else c for c, up in zip(word, ups, strict=True))
    )


yes_words = st.sampled_from(TRUE_WORDS).flatmap(any_case)
no_words = st.sampled_from(FALSE_WORDS).flatmap(any_case)
not_words = st.text(max_size=8).filter(
    lambda t: t.strip().lower() not in {*TRUE_WORDS, *FALSE_WORDS}
)


@given(yes_words, no_words)
def test_yes_no_words_mean_their_value_in_every_kind_of_field(yes, no):
    data = {"push": no, "maybe": yes, "many": [yes, no, True, 0], "shape": {"type": "lamp"}}
    data["shape"]["lit"] = no
    assert structure(data, Switches) == Switches(
        push=False, maybe=True, many=[True, False, True, False], shape=Lamp(lit=False)
    )
    assert parse_bool(yes) is True and parse_bool(no) is False


@given(not_words, st.sampled_from(["push", "maybe", "shape.lit", "many"]))
def test_any_other_word_is_refused_by_name(word, key):
    overrides = [("shape.type", "lamp"), (key, [word] if key == "many" else word)]
    with pytest.raises(ConfigError) as info:
        resolve(Switches, unstructure(Switches()), overrides=overrides)
    assert info.value.where == (f"{key}[0]" if key == "many" else key)
    assert info.value.message == f"{word!r} is not a yes/no value; write true or false"


@pytest.mark.parametrize("value", [2, -1, 0.5, [], {}, None])
def test_non_words_are_not_yes_or_no_either(value):
    with pytest.raises(ConfigError, match="is not a yes/no value"):
        structure({"push": value}, Switches)


def test_null_is_a_value_only_where_a_setting_may_be_unset():
    assert structure({"maybe": None}, Switches).maybe is None


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("many", "'many' is not a whole number"),
        (2.5, "2.5 is not a whole number"),
        (True, "true is not a whole number"),
        ("", "'' is not a whole number"),
    ],
)
def test_whole_numbers_refuse_what_would_be_truncated_or_guessed(value, fragment):
    with pytest.raises(ConfigError, match=fragment) as info:
        structure({"steps": value}, Scene)
    assert info.value.where == "steps"


def test_whole_numbers_as_people_write_them():
    assert structure({"steps": "12"}, Scene).steps == 12
    assert structure({"steps": 1e3}, Scene).steps == 1000
    assert structure({"steps": " 7 "}, Scene).steps == 7


def test_numbers_and_text_refuse_the_other_kind():
    with pytest.raises(ConfigError, match="'big' is not a number"):
        structure({"type": "ball", "radius": "big"}, ShapeConfig)
    with pytest.raises(ConfigError, match="expected text, got a yes/no value"):
        structure({"name": True}, Scene)
    with pytest.raises(ConfigError, match="expected text, got null"):
        structure({"name": None}, Scene)
    assert structure({"name": 12}, Scene).name == "12"


@pytest.mark.parametrize("text", ["0,1", "[0,1]", "[0, 1]", " 0, 1 ", "0,1,"])
def test_a_list_may_be_written_as_text(text):
    @attrs.frozen
    class Pick:
        episodes: list[int] | None = None

    assert structure({"episodes": text}, Pick).episodes == [0, 1]
    assert resolve(Pick, overrides=parse_overrides([f"--episodes={text}"])).episodes == [0, 1]


def test_one_word_for_a_tuple_of_words_is_one_item_not_its_letters():
    assert structure({"type": "box", "tags": "demo"}, ShapeConfig).tags == ("demo",)
    assert structure({"type": "box", "tags": "[a, 'b']"}, ShapeConfig).tags == ("a", "b")


def test_a_bad_item_of_a_list_is_named_with_its_index():
    @attrs.frozen
    class Pick:
        episodes: list[int] = attrs.field(factory=list)

    with pytest.raises(ConfigError) as info:
        structure({"episodes": "0,x"}, Pick)
    assert info.value.where == "episodes[1]" and "'x' is not a whole number" in info.value.message


def test_a_choice_names_the_choices():
    from typing import Literal

    @attrs.frozen
    class Mode:
        mode: Literal["fast", "slow"] = "fast"
        angle: Literal[0, 90] = 0

    with pytest.raises(ConfigError) as info:
        structure({"mode": "quick"}, Mode)
    assert info.value.where == "mode" and "'quick' is not one of: fast, slow" in str(info.value)
    assert structure({"angle": "90"}, Mode).angle == 90
    assert structure({"mode": "Slow"}, Mode).mode == "slow"


@pytest.mark.parametrize(("word", "answer"), [("true", "yes"), ("OFF", "no"), ("No", "no")])
def test_a_yes_no_choice_reads_yes_no_words(word, answer):
    from typing import Literal

    @attrs.frozen
    class Reuse:
        reuse: Literal["ask", "yes", "no"] = "ask"

    assert resolve(Reuse, overrides=parse_overrides([f"--reuse={word}"])).reuse == answer
    with pytest.raises(ConfigError, match="'maybe' is not one of: ask, yes, no"):
        structure({"reuse": "maybe"}, Reuse)


# --- a section's default kind --------------------------------------------------------------


@attrs.frozen
class Stage:
    # The default member is not the member's own defaults: size 3.
    shape: ShapeConfig = attrs.field(factory=lambda: Box(size=3))
    spare: ShapeConfig | None = attrs.field(factory=lambda: Ball(radius=2.0))
    none: ShapeConfig | None = None


@attrs.frozen
class Theatre:
    stage: Stage | None = None


def test_fields_of_a_section_keep_its_default_kind_and_defaults():
    assert structure({"shape": {"tags": ["x"]}}, Stage).shape == Box(size=3, tags=("x",))
    assert structure({"spare": {}}, Stage).spare == Ball(radius=2.0)


def test_naming_the_default_kind_keeps_the_defaults():
    assert structure({"shape": {"type": "box"}}, Stage).shape == Box(size=3)
    assert structure({"spare": {"type": "ball"}}, Stage).spare == Ball(radius=2.0)


def test_another_kind_starts_from_its_own_defaults():
    assert structure({"shape": {"type": "ball"}}, Stage).shape == Ball()
    assert structure({"spare": {"type": "box"}}, Stage).spare == Box()


def test_the_default_kind_holds_in_a_section_that_was_not_there():
    theatre = resolve(Theatre, overrides=parse_overrides(["--stage.shape.tags=[x]"]))
    assert theatre.stage == Stage(shape=Box(size=3, tags=("x",)))
    theatre = resolve(Theatre, overrides=parse_overrides(["--stage.shape.type=box"]))
    assert theatre.stage == Stage()


def test_a_section_without_a_default_kind_still_asks_for_one():
    with pytest.raises(ConfigError, match="needs a 'type'") as info:
        structure({"none": {"size": 2}}, Stage)
    assert info.value.where == "none" and "box, ball" in str(info.value)
