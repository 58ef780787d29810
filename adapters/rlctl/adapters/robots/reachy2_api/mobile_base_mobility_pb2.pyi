from google.protobuf import wrappers_pb2 as _wrappers_pb2
from rlctl.adapters.robots.reachy2_api import part_pb2 as _part_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DirectionVector(_message.Message):
    __slots__ = ("x", "y", "theta")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    THETA_FIELD_NUMBER: _ClassVar[int]
    x: _wrappers_pb2.FloatValue
    y: _wrappers_pb2.FloatValue
    theta: _wrappers_pb2.FloatValue
    def __init__(self, x: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., y: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., theta: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class TargetDirectionCommand(_message.Message):
    __slots__ = ("id", "direction")
    ID_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    direction: DirectionVector
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., direction: _Optional[_Union[DirectionVector, _Mapping]] = ...) -> None: ...

class SetSpeedVector(_message.Message):
    __slots__ = ("id", "x_vel", "y_vel", "rot_vel", "duration")
    ID_FIELD_NUMBER: _ClassVar[int]
    X_VEL_FIELD_NUMBER: _ClassVar[int]
    Y_VEL_FIELD_NUMBER: _ClassVar[int]
    ROT_VEL_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    x_vel: _wrappers_pb2.FloatValue
    y_vel: _wrappers_pb2.FloatValue
    rot_vel: _wrappers_pb2.FloatValue
    duration: _wrappers_pb2.FloatValue
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., x_vel: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., y_vel: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., rot_vel: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., duration: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class DistanceToGoalVector(_message.Message):
    __slots__ = ("delta_x", "delta_y", "delta_theta", "distance")
    DELTA_X_FIELD_NUMBER: _ClassVar[int]
    DELTA_Y_FIELD_NUMBER: _ClassVar[int]
    DELTA_THETA_FIELD_NUMBER: _ClassVar[int]
    DISTANCE_FIELD_NUMBER: _ClassVar[int]
    delta_x: _wrappers_pb2.FloatValue
    delta_y: _wrappers_pb2.FloatValue
    delta_theta: _wrappers_pb2.FloatValue
    distance: _wrappers_pb2.FloatValue
    def __init__(self, delta_x: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., delta_y: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., delta_theta: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., distance: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class MobilityServiceAck(_message.Message):
    __slots__ = ("success",)
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    success: _wrappers_pb2.BoolValue
    def __init__(self, success: _Optional[_Union[_wrappers_pb2.BoolValue, _Mapping]] = ...) -> None: ...
