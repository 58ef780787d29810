from rlctl.adapters.remote import policy_service_pb2 as _policy_service_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ActorHello(_message.Message):
    __slots__ = ("features", "action_bounds", "observation_bounds")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    ACTION_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    features: _policy_service_pb2.Features
    action_bounds: bytes
    observation_bounds: bytes
    def __init__(self, features: _Optional[_Union[_policy_service_pb2.Features, _Mapping]] = ..., action_bounds: _Optional[bytes] = ..., observation_bounds: _Optional[bytes] = ...) -> None: ...

class LearnerDescription(_message.Message):
    __slots__ = ("config_json", "stats", "parameters_version")
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_VERSION_FIELD_NUMBER: _ClassVar[int]
    config_json: str
    stats: bytes
    parameters_version: int
    def __init__(self, config_json: _Optional[str] = ..., stats: _Optional[bytes] = ..., parameters_version: _Optional[int] = ...) -> None: ...

class TransitionBatch(_message.Message):
    __slots__ = ("transitions", "report_json")
    TRANSITIONS_FIELD_NUMBER: _ClassVar[int]
    REPORT_JSON_FIELD_NUMBER: _ClassVar[int]
    transitions: bytes
    report_json: str
    def __init__(self, transitions: _Optional[bytes] = ..., report_json: _Optional[str] = ...) -> None: ...

class PushReply(_message.Message):
    __slots__ = ("accepted", "parameters_version")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_VERSION_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    parameters_version: int
    def __init__(self, accepted: _Optional[int] = ..., parameters_version: _Optional[int] = ...) -> None: ...

class ParametersRequest(_message.Message):
    __slots__ = ("have_version",)
    HAVE_VERSION_FIELD_NUMBER: _ClassVar[int]
    have_version: int
    def __init__(self, have_version: _Optional[int] = ...) -> None: ...

class Parameters(_message.Message):
    __slots__ = ("version", "weights")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    version: int
    weights: bytes
    def __init__(self, version: _Optional[int] = ..., weights: _Optional[bytes] = ...) -> None: ...
