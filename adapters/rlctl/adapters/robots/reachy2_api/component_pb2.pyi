from google.protobuf import wrappers_pb2 as _wrappers_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ComponentId(_message.Message):
    __slots__ = ("id", "name")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    id: int
    name: str
    def __init__(self, id: _Optional[int] = ..., name: _Optional[str] = ...) -> None: ...

class PIDGains(_message.Message):
    __slots__ = ("p", "i", "d")
    P_FIELD_NUMBER: _ClassVar[int]
    I_FIELD_NUMBER: _ClassVar[int]
    D_FIELD_NUMBER: _ClassVar[int]
    p: _wrappers_pb2.FloatValue
    i: _wrappers_pb2.FloatValue
    d: _wrappers_pb2.FloatValue
    def __init__(self, p: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., i: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., d: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class JointLimits(_message.Message):
    __slots__ = ("min", "max")
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    min: _wrappers_pb2.FloatValue
    max: _wrappers_pb2.FloatValue
    def __init__(self, min: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., max: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...
