from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DescribeRequest(_message.Message):
    __slots__ = ("policy", "provided")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    PROVIDED_FIELD_NUMBER: _ClassVar[int]
    policy: str
    provided: Features
    def __init__(self, policy: _Optional[str] = ..., provided: _Optional[_Union[Features, _Mapping]] = ...) -> None: ...

class PolicyDescription(_message.Message):
    __slots__ = ("name", "config_json", "actions_per_chunk", "observation_features")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_PER_CHUNK_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FEATURES_FIELD_NUMBER: _ClassVar[int]
    name: str
    config_json: str
    actions_per_chunk: int
    observation_features: Features
    def __init__(self, name: _Optional[str] = ..., config_json: _Optional[str] = ..., actions_per_chunk: _Optional[int] = ..., observation_features: _Optional[_Union[Features, _Mapping]] = ...) -> None: ...

class Features(_message.Message):
    __slots__ = ("features",)
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedCompositeFieldContainer[Feature]
    def __init__(self, features: _Optional[_Iterable[_Union[Feature, _Mapping]]] = ...) -> None: ...

class Feature(_message.Message):
    __slots__ = ("key", "dtype", "shape", "kind", "info_json")
    KEY_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    INFO_JSON_FIELD_NUMBER: _ClassVar[int]
    key: str
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    kind: str
    info_json: str
    def __init__(self, key: _Optional[str] = ..., dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., kind: _Optional[str] = ..., info_json: _Optional[str] = ...) -> None: ...

class ChunkRequest(_message.Message):
    __slots__ = ("observation", "task", "timestep", "policy", "max_actions", "rtc")
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TIMESTEP_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    MAX_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    RTC_FIELD_NUMBER: _ClassVar[int]
    observation: bytes
    task: _containers.RepeatedScalarFieldContainer[str]
    timestep: int
    policy: str
    max_actions: int
    rtc: RealTimeChunking
    def __init__(self, observation: _Optional[bytes] = ..., task: _Optional[_Iterable[str]] = ..., timestep: _Optional[int] = ..., policy: _Optional[str] = ..., max_actions: _Optional[int] = ..., rtc: _Optional[_Union[RealTimeChunking, _Mapping]] = ...) -> None: ...

class RealTimeChunking(_message.Message):
    __slots__ = ("committed", "inference_delay", "settings")
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_DELAY_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    committed: bytes
    inference_delay: int
    settings: RTCSettings
    def __init__(self, committed: _Optional[bytes] = ..., inference_delay: _Optional[int] = ..., settings: _Optional[_Union[RTCSettings, _Mapping]] = ...) -> None: ...

class RTCSettings(_message.Message):
    __slots__ = ("enabled", "prefix_attention_schedule", "max_guidance_weight", "execution_horizon", "debug", "debug_maxlen")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    PREFIX_ATTENTION_SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    MAX_GUIDANCE_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_HORIZON_FIELD_NUMBER: _ClassVar[int]
    DEBUG_FIELD_NUMBER: _ClassVar[int]
    DEBUG_MAXLEN_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    prefix_attention_schedule: str
    max_guidance_weight: float
    execution_horizon: int
    debug: bool
    debug_maxlen: int
    def __init__(self, enabled: _Optional[bool] = ..., prefix_attention_schedule: _Optional[str] = ..., max_guidance_weight: _Optional[float] = ..., execution_horizon: _Optional[int] = ..., debug: _Optional[bool] = ..., debug_maxlen: _Optional[int] = ...) -> None: ...

class ChunkReply(_message.Message):
    __slots__ = ("actions", "timestep", "inference_s")
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    TIMESTEP_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_S_FIELD_NUMBER: _ClassVar[int]
    actions: bytes
    timestep: int
    inference_s: float
    def __init__(self, actions: _Optional[bytes] = ..., timestep: _Optional[int] = ..., inference_s: _Optional[float] = ...) -> None: ...
