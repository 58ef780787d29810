import json

from hypothesis import given
from hypothesis import strategies as st

from rlctl.domain.errors import InvalidInput
from rlctl.domain.features import FeatureKind, FeatureSpec, features_from_info, features_to_info

keys = st.sampled_from(
    [
        "observation.state",
        "action",
        "observation.images.front",
        "observation.environment_state",
        "next.reward",
        "timestamp",
        "index",
        "custom",
    ]
)
names = st.one_of(
    st.none(),
    st.lists(st.text(min_size=1, max_size=8), max_size=4),
    st.dictionaries(st.sampled_from(["motors", "axes"]), st.lists(st.text(max_size=5), max_size=3)),
)
video_info = st.fixed_dictionaries(
    {
        "video.codec": st.sampled_from(["av1", "h264"]),
        "video.fps": st.integers(1, 60),
        "has_audio": st.booleans(),
        "video.extra_options": st.just({}),
    }
)
entries = st.fixed_dictionaries(
    {
        "dtype": st.sampled_from(["float32", "int64", "video", "image", "bool", "string"]),
        "shape": st.lists(st.integers(0, 512), min_size=1, max_size=3),
        "names": names,
    },
    optional={"info": st.one_of(st.none(), video_info), "fps": st.integers(1, 60)},
)


@given(st.dictionaries(keys, entries, max_size=6))
def test_features_round_trip_through_info_json(features):
    parsed = features_from_info(features)
    back = features_to_info(parsed)
    assert json.loads(json.dumps(back)) == {
        k: {**{"names": None}, **v} for k, v in features.items()
    }
    assert list(back) == list(features)
    assert features_from_info(back) == parsed


def test_fixture_features_round_trip(fixtures_dir):
    info = json.loads((fixtures_dir / "sim_video/meta/info.json").read_text())
    parsed = features_from_info(info["features"])
    assert features_to_info(parsed) == info["features"]
    front = parsed["observation.images.front"]
    assert front.is_video and front.kind is FeatureKind.VISUAL and front.hwc == (48, 64, 3)
    assert parsed["observation.state"].kind is FeatureKind.STATE
    assert parsed["action"].kind is FeatureKind.ACTION
    assert parsed["index"].kind is FeatureKind.INDEX


def test_channels_first_visual_shape_is_understood():
    spec = FeatureSpec.from_info(
        "observation.images.top",
        {"dtype": "image", "shape": [3, 96, 128], "names": ["channels", "height", "width"]},
    )
    assert spec.hwc == (96, 128, 3)


def test_missing_dtype_names_the_feature():
    try:
        FeatureSpec.from_info("action", {"shape": [6]})
    except InvalidInput as err:
        assert err.where == "features.action" and "dtype" in err.message
    else:  # pragma: no cover
        raise AssertionError("expected InvalidInput")
