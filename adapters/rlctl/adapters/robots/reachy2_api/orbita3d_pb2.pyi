import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import wrappers_pb2 as _wrappers_pb2
from rlctl.adapters.robots.reachy2_api import component_pb2 as _component_pb2
from rlctl.adapters.robots.reachy2_api import error_pb2 as _error_pb2
from rlctl.adapters.robots.reachy2_api import kinematics_pb2 as _kinematics_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Orbita3dField(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[Orbita3dField]
    NAME: _ClassVar[Orbita3dField]
    ID: _ClassVar[Orbita3dField]
    PRESENT_POSITION: _ClassVar[Orbita3dField]
    PRESENT_SPEED: _ClassVar[Orbita3dField]
    PRESENT_LOAD: _ClassVar[Orbita3dField]
    TEMPERATURE: _ClassVar[Orbita3dField]
    JOINT_LIMITS: _ClassVar[Orbita3dField]
    COMPLIANT: _ClassVar[Orbita3dField]
    GOAL_POSITION: _ClassVar[Orbita3dField]
    SPEED_LIMIT: _ClassVar[Orbita3dField]
    TORQUE_LIMIT: _ClassVar[Orbita3dField]
    PID: _ClassVar[Orbita3dField]
    ALL: _ClassVar[Orbita3dField]
NONE: Orbita3dField
NAME: Orbita3dField
ID: Orbita3dField
PRESENT_POSITION: Orbita3dField
PRESENT_SPEED: Orbita3dField
PRESENT_LOAD: Orbita3dField
TEMPERATURE: Orbita3dField
JOINT_LIMITS: Orbita3dField
COMPLIANT: Orbita3dField
GOAL_POSITION: Orbita3dField
SPEED_LIMIT: Orbita3dField
TORQUE_LIMIT: Orbita3dField
PID: Orbita3dField
ALL: Orbita3dField

class Orbita3dState(_message.Message):
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
    present_position: _kinematics_pb2.Rotation3d
    present_speed: Vector3d
    present_load: Vector3d
    temperature: Float3d
    joint_limits: Limits3d
    compliant: _wrappers_pb2.BoolValue
    goal_position: _kinematics_pb2.Rotation3d
    speed_limit: Float3d
    torque_limit: Float3d
    pid: PID3d
    def __init__(self, timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., id: _Optional[_Union[_component_pb2.ComponentId, _Mapping]] = ..., present_position: _Optional[_Union[_kinematics_pb2.Rotation3d, _Mapping]] = ..., present_speed: _Optional[_Union[Vector3d, _Mapping]] = ..., present_load: _Optional[_Union[Vector3d, _Mapping]] = ..., temperature: _Optional[_Union[Float3d, _Mapping]] = ..., joint_limits: _Optional[_Union[Limits3d, _Mapping]] = ..., compliant: _Optional[_Union[_wrappers_pb2.BoolValue, _Mapping]] = ..., goal_position: _Optional[_Union[_kinematics_pb2.Rotation3d, _Mapping]] = ..., speed_limit: _Optional[_Union[Float3d, _Mapping]] = ..., torque_limit: _Optional[_Union[Float3d, _Mapping]] = ..., pid: _Optional[_Union[PID3d, _Mapping]] = ...) -> None: ...

class Orbita3dStateRequest(_message.Message):
    __slots__ = ("fields", "id")
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.RepeatedScalarFieldContainer[Orbita3dField]
    id: _component_pb2.ComponentId
    def __init__(self, fields: _Optional[_Iterable[_Union[Orbita3dField, str]]] = ..., id: _Optional[_Union[_component_pb2.ComponentId, _Mapping]] = ...) -> None: ...

class Orbita3dStreamStateRequest(_message.Message):
    __slots__ = ("req", "freq")
    REQ_FIELD_NUMBER: _ClassVar[int]
    FREQ_FIELD_NUMBER: _ClassVar[int]
    req: Orbita3dStateRequest
    freq: float
    def __init__(self, req: _Optional[_Union[Orbita3dStateRequest, _Mapping]] = ..., freq: _Optional[float] = ...) -> None: ...

class PID3d(_message.Message):
    __slots__ = ("motor_1", "motor_2", "motor_3")
    MOTOR_1_FIELD_NUMBER: _ClassVar[int]
    MOTOR_2_FIELD_NUMBER: _ClassVar[int]
    MOTOR_3_FIELD_NUMBER: _ClassVar[int]
    motor_1: _component_pb2.PIDGains
    motor_2: _component_pb2.PIDGains
    motor_3: _component_pb2.PIDGains
    def __init__(self, motor_1: _Optional[_Union[_component_pb2.PIDGains, _Mapping]] = ..., motor_2: _Optional[_Union[_component_pb2.PIDGains, _Mapping]] = ..., motor_3: _Optional[_Union[_component_pb2.PIDGains, _Mapping]] = ...) -> None: ...

class Limits3d(_message.Message):
    __slots__ = ("roll", "pitch", "yaw")
    ROLL_FIELD_NUMBER: _ClassVar[int]
    PITCH_FIELD_NUMBER: _ClassVar[int]
    YAW_FIELD_NUMBER: _ClassVar[int]
    roll: _component_pb2.JointLimits
    pitch: _component_pb2.JointLimits
    yaw: _component_pb2.JointLimits
    def __init__(self, roll: _Optional[_Union[_component_pb2.JointLimits, _Mapping]] = ..., pitch: _Optional[_Union[_component_pb2.JointLimits, _Mapping]] = ..., yaw: _Optional[_Union[_component_pb2.JointLimits, _Mapping]] = ...) -> None: ...

class Float3d(_message.Message):
    __slots__ = ("motor_1", "motor_2", "motor_3")
    MOTOR_1_FIELD_NUMBER: _ClassVar[int]
    MOTOR_2_FIELD_NUMBER: _ClassVar[int]
    MOTOR_3_FIELD_NUMBER: _ClassVar[int]
    motor_1: _wrappers_pb2.FloatValue
    motor_2: _wrappers_pb2.FloatValue
    motor_3: _wrappers_pb2.FloatValue
    def __init__(self, motor_1: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., motor_2: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., motor_3: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class Vector3d(_message.Message):
    __slots__ = ("x", "y", "z")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    Z_FIELD_NUMBER: _ClassVar[int]
    x: _wrappers_pb2.FloatValue
    y: _wrappers_pb2.FloatValue
    z: _wrappers_pb2.FloatValue
    def __init__(self, x: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., y: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., z: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class Orbita3dCommand(_message.Message):
    __slots__ = ("id", "compliant", "goal_position", "speed_limit", "torque_limit", "pid")
    ID_FIELD_NUMBER: _ClassVar[int]
    COMPLIANT_FIELD_NUMBER: _ClassVar[int]
    GOAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    SPEED_LIMIT_FIELD_NUMBER: _ClassVar[int]
    TORQUE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    id: _component_pb2.ComponentId
    compliant: _wrappers_pb2.BoolValue
    goal_position: _kinematics_pb2.Rotation3d
    speed_limit: Float3d
    torque_limit: Float3d
    pid: PID3d
    def __init__(self, id: _Optional[_Union[_component_pb2.ComponentId, _Mapping]] = ..., compliant: _Optional[_Union[_wrappers_pb2.BoolValue, _Mapping]] = ..., goal_position: _Optional[_Union[_kinematics_pb2.Rotation3d, _Mapping]] = ..., speed_limit: _Optional[_Union[Float3d, _Mapping]] = ..., torque_limit: _Optional[_Union[Float3d, _Mapping]] = ..., pid: _Optional[_Union[PID3d, _Mapping]] = ...) -> None: ...

class Orbita3dsCommand(_message.Message):
    __slots__ = ("cmd",)
    CMD_FIELD_NUMBER: _ClassVar[int]
    cmd: _containers.RepeatedCompositeFieldContainer[Orbita3dCommand]
    def __init__(self, cmd: _Optional[_Iterable[_Union[Orbita3dCommand, _Mapping]]] = ...) -> None: ...

class Orbita3dGoal(_message.Message):
    __slots__ = ("id", "rotation", "duration")
    ID_FIELD_NUMBER: _ClassVar[int]
    ROTATION_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    id: _component_pb2.ComponentId
    rotation: _kinematics_pb2.Rotation3d
    duration: _wrappers_pb2.FloatValue
    def __init__(self, id: _Optional[_Union[_component_pb2.ComponentId, _Mapping]] = ..., rotation: _Optional[_Union[_kinematics_pb2.Rotation3d, _Mapping]] = ..., duration: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class Orbita3d(_message.Message):
    __slots__ = ("id", "serial_number")
    ID_FIELD_NUMBER: _ClassVar[int]
    SERIAL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    id: _component_pb2.ComponentId
    serial_number: str
    def __init__(self, id: _Optional[_Union[_component_pb2.ComponentId, _Mapping]] = ..., serial_number: _Optional[str] = ...) -> None: ...

class ListOfOrbita3d(_message.Message):
    __slots__ = ("info",)
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: _containers.RepeatedCompositeFieldContainer[Orbita3d]
    def __init__(self, info: _Optional[_Iterable[_Union[Orbita3d, _Mapping]]] = ...) -> None: ...

class Orbita3dStatus(_message.Message):
    __slots__ = ("errors",)
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    errors: _containers.RepeatedCompositeFieldContainer[_error_pb2.Error]
    def __init__(self, errors: _Optional[_Iterable[_Union[_error_pb2.Error, _Mapping]]] = ...) -> None: ...
