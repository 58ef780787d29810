import datetime

from google.protobuf import wrappers_pb2 as _wrappers_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from rlctl.adapters.robots.reachy2_api import component_pb2 as _component_pb2
from rlctl.adapters.robots.reachy2_api import error_pb2 as _error_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Orbita2dField(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[Orbita2dField]
    NAME: _ClassVar[Orbita2dField]
    ID: _ClassVar[Orbita2dField]
    PRESENT_POSITION: _ClassVar[Orbita2dField]
    PRESENT_SPEED: _ClassVar[Orbita2dField]
    PRESENT_LOAD: _ClassVar[Orbita2dField]
    TEMPERATURE: _ClassVar[Orbita2dField]
    JOINT_LIMITS: _ClassVar[Orbita2dField]
    COMPLIANT: _ClassVar[Orbita2dField]
    GOAL_POSITION: _ClassVar[Orbita2dField]
    SPEED_LIMIT: _ClassVar[Orbita2dField]
    TORQUE_LIMIT: _ClassVar[Orbita2dField]
    PID: _ClassVar[Orbita2dField]
    ALL: _ClassVar[Orbita2dField]

class Axis(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLL: _ClassVar[Axis]
    PITCH: _ClassVar[Axis]
    YAW: _ClassVar[Axis]
NONE: Orbita2dField
NAME: Orbita2dField
ID: Orbita2dField
PRESENT_POSITION: Orbita2dField
PRESENT_SPEED: Orbita2dField
PRESENT_LOAD: Orbita2dField
TEMPERATURE: Orbita2dField
JOINT_LIMITS: Orbita2dField
COMPLIANT: Orbita2dField
GOAL_POSITION: Orbita2dField
SPEED_LIMIT: Orbita2dField
TORQUE_LIMIT: Orbita2dField
PID: Orbita2dField
ALL: Orbita2dField
ROLL: Axis
PITCH: Axis
YAW: Axis

class Orbita2dState(_message.Message):
    __slots__ = ("timestamp", "id", "present_position", "present_speed", "present_load", "temperature", "joint_limits", "compliant", "goal_position", "speed_limit", "torque_limit", "pid")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PRESENT_POSITION_FIELD_NUMBER: _ClassVar[int]
    PRESENT_SPEED_FIELD_NUMBER: _ClassVar[int]
    PRESENT_LOAD_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    JOINT_LIMITS_FIELD_NUMBER: _ClassVar[int]
    COMPLIANT_FIELD_NUMBER: _ClassVar[int]
    GOAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    SPEED_LIMIT_FIELD_NUMBER: _ClassVar[int]
    TORQUE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    timestamp: _timestamp_pb2.Timestamp
    id: _component_pb2.ComponentId
    present_position: Pose2d
    present_speed: Vector2d
    present_load: Vector2d
    temperature: Float2d
    joint_limits: Limits2d
    compliant: _wrappers_pb2.BoolValue
    goal_position: Pose2d
    speed_limit: Float2d
    torque_limit: Float2d
    pid: PID2d
    def __init__(self, timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., id: _Optional[_Union[_component_pb2.ComponentId, _Mapping]] = ..., present_position: _Optional[_Union[Pose2d, _Mapping]] = ..., present_speed: _Optional[_Union[Vector2d, _Mapping]] = ..., present_load: _Optional[_Union[Vector2d, _Mapping]] = ..., temperature: _Optional[_Union[Float2d, _Mapping]] = ..., joint_limits: _Optional[_Union[Limits2d, _Mapping]] = ..., compliant: _Optional[_Union[_wrappers_pb2.BoolValue, _Mapping]] = ..., goal_position: _Optional[_Union[Pose2d, _Mapping]] = ..., speed_limit: _Optional[_Union[Float2d, _Mapping]] = ..., torque_limit: _Optional[_Union[Float2d, _Mapping]] = ..., pid: _Optional[_Union[PID2d, _Mapping]] = ...) -> None: ...

class Orbita2dStateRequest(_message.Message):
    __slots__ = ("fields", "id")
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.RepeatedScalarFieldContainer[Orbita2dField]
    id: _component_pb2.ComponentId
    def __init__(self, fields: _Optional[_Iterable[_Union[Orbita2dField, str]]] = ..., id: _Optional[_Union[_component_pb2.ComponentId, _Mapping]] = ...) -> None: ...

class Orbita2dStreamStateRequest(_message.Message):
    __slots__ = ("req", "freq")
    REQ_FIELD_NUMBER: _ClassVar[int]
    FREQ_FIELD_NUMBER: _ClassVar[int]
    req: Orbita2dStateRequest
    freq: float
    def __init__(self, req: _Optional[_Union[Orbita2dStateRequest, _Mapping]] = ..., freq: _Optional[float] = ...) -> None: ...

class PID2d(_message.Message):
    __slots__ = ("motor_1", "motor_2")
    MOTOR_1_FIELD_NUMBER: _ClassVar[int]
    MOTOR_2_FIELD_NUMBER: _ClassVar[int]
    motor_1: _component_pb2.PIDGains
    motor_2: _component_pb2.PIDGains
    def __init__(self, motor_1: _Optional[_Union[_component_pb2.PIDGains, _Mapping]] = ..., motor_2: _Optional[_Union[_component_pb2.PIDGains, _Mapping]] = ...) -> None: ...

class Limits2d(_message.Message):
    __slots__ = ("axis_1", "axis_2")
    AXIS_1_FIELD_NUMBER: _ClassVar[int]
    AXIS_2_FIELD_NUMBER: _ClassVar[int]
    axis_1: _component_pb2.JointLimits
    axis_2: _component_pb2.JointLimits
    def __init__(self, axis_1: _Optional[_Union[_component_pb2.JointLimits, _Mapping]] = ..., axis_2: _Optional[_Union[_component_pb2.JointLimits, _Mapping]] = ...) -> None: ...

class Pose2d(_message.Message):
    __slots__ = ("axis_1", "axis_2")
    AXIS_1_FIELD_NUMBER: _ClassVar[int]
    AXIS_2_FIELD_NUMBER: _ClassVar[int]
    axis_1: _wrappers_pb2.FloatValue
    axis_2: _wrappers_pb2.FloatValue
    def __init__(self, axis_1: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., axis_2: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class Float2d(_message.Message):
    __slots__ = ("motor_1", "motor_2")
    MOTOR_1_FIELD_NUMBER: _ClassVar[int]
    MOTOR_2_FIELD_NUMBER: _ClassVar[int]
    motor_1: _wrappers_pb2.FloatValue
    motor_2: _wrappers_pb2.FloatValue
    def __init__(self, motor_1: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., motor_2: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class Vector2d(_message.Message):
    __slots__ = ("x", "y")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    x: _wrappers_pb2.FloatValue
    y: _wrappers_pb2.FloatValue
    def __init__(self, x: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., y: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class Orbita2dCommand(_message.Message):
    __slots__ = ("id", "compliant", "goal_position", "speed_limit", "torque_limit", "pid")
    ID_FIELD_NUMBER: _ClassVar[int]
    COMPLIANT_FIELD_NUMBER: _ClassVar[int]
    GOAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    SPEED_LIMIT_FIELD_NUMBER: _ClassVar[int]
    TORQUE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    id: _component_pb2.ComponentId
    compliant: _wrappers_pb2.BoolValue
    goal_position: Pose2d
    speed_limit: Float2d
    torque_limit: Float2d
    pid: PID2d
    def __init__(self, id: _Optional[_Union[_component_pb2.ComponentId, _Mapping]] = ..., compliant: _Optional[_Union[_wrappers_pb2.BoolValue, _Mapping]] = ..., goal_position: _Optional[_Union[Pose2d, _Mapping]] = ..., speed_limit: _Optional[_Union[Float2d, _Mapping]] = ..., torque_limit: _Optional[_Union[Float2d, _Mapping]] = ..., pid: _Optional[_Union[PID2d, _Mapping]] = ...) -> None: ...

class Orbita2dsCommand(_message.Message):
    __slots__ = ("cmd",)
    CMD_FIELD_NUMBER: _ClassVar[int]
    cmd: _containers.RepeatedCompositeFieldContainer[Orbita2dCommand]
    def __init__(self, cmd: _Optional[_Iterable[_Union[Orbita2dCommand, _Mapping]]] = ...) -> None: ...

class Orbita2d(_message.Message):
    __slots__ = ("id", "serial_number", "axis_1", "axis_2")
    ID_FIELD_NUMBER: _ClassVar[int]
    SERIAL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    AXIS_1_FIELD_NUMBER: _ClassVar[int]
    AXIS_2_FIELD_NUMBER: _ClassVar[int]
    id: _component_pb2.ComponentId
    serial_number: str
    axis_1: Axis
    axis_2: Axis
    def __init__(self, id: _Optional[_Union[_component_pb2.ComponentId, _Mapping]] = ..., serial_number: _Optional[str] = ..., axis_1: _Optional[_Union[Axis, str]] = ..., axis_2: _Optional[_Union[Axis, str]] = ...) -> None: ...

class ListOfOrbita2d(_message.Message):
    __slots__ = ("orbita2d",)
    ORBITA2D_FIELD_NUMBER: _ClassVar[int]
    orbita2d: _containers.RepeatedCompositeFieldContainer[Orbita2d]
    def __init__(self, orbita2d: _Optional[_Iterable[_Union[Orbita2d, _Mapping]]] = ...) -> None: ...

class Orbita2dStatus(_message.Message):
    __slots__ = ("errors",)
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    errors: _containers.RepeatedCompositeFieldContainer[_error_pb2.Error]
    def __init__(self, errors: _Optional[_Iterable[_Union[_error_pb2.Error, _Mapping]]] = ...) -> None: ...
