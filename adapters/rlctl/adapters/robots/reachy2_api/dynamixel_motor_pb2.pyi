import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import wrappers_pb2 as _wrappers_pb2
from rlctl.adapters.robots.reachy2_api import component_pb2 as _component_pb2
from rlctl.adapters.robots.reachy2_api import error_pb2 as _error_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DynamixelMotorField(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[DynamixelMotorField]
    NAME: _ClassVar[DynamixelMotorField]
    ID: _ClassVar[DynamixelMotorField]
    PRESENT_POSITION: _ClassVar[DynamixelMotorField]
    PRESENT_SPEED: _ClassVar[DynamixelMotorField]
    PRESENT_LOAD: _ClassVar[DynamixelMotorField]
    TEMPERATURE: _ClassVar[DynamixelMotorField]
    JOINT_LIMITS: _ClassVar[DynamixelMotorField]
    COMPLIANT: _ClassVar[DynamixelMotorField]
    GOAL_POSITION: _ClassVar[DynamixelMotorField]
    SPEED_LIMIT: _ClassVar[DynamixelMotorField]
    TORQUE_LIMIT: _ClassVar[DynamixelMotorField]
    PID: _ClassVar[DynamixelMotorField]
    ALL: _ClassVar[DynamixelMotorField]
NONE: DynamixelMotorField
NAME: DynamixelMotorField
ID: DynamixelMotorField
PRESENT_POSITION: DynamixelMotorField
PRESENT_SPEED: DynamixelMotorField
PRESENT_LOAD: DynamixelMotorField
TEMPERATURE: DynamixelMotorField
JOINT_LIMITS: DynamixelMotorField
COMPLIANT: DynamixelMotorField
GOAL_POSITION: DynamixelMotorField
SPEED_LIMIT: DynamixelMotorField
TORQUE_LIMIT: DynamixelMotorField
PID: DynamixelMotorField
ALL: DynamixelMotorField

class DynamixelMotorState(_message.Message):
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
    present_position: _wrappers_pb2.FloatValue
    present_speed: _wrappers_pb2.FloatValue
    present_load: _wrappers_pb2.FloatValue
    temperature: _wrappers_pb2.FloatValue
    joint_limits: _component_pb2.JointLimits
    compliant: _wrappers_pb2.BoolValue
    goal_position: _wrappers_pb2.FloatValue
    speed_limit: _wrappers_pb2.FloatValue
    torque_limit: _wrappers_pb2.FloatValue
    pid: _component_pb2.PIDGains
    def __init__(self, timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., id: _Optional[_Union[_component_pb2.ComponentId, _Mapping]] = ..., present_position: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., present_speed: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., present_load: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., temperature: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., joint_limits: _Optional[_Union[_component_pb2.JointLimits, _Mapping]] = ..., compliant: _Optional[_Union[_wrappers_pb2.BoolValue, _Mapping]] = ..., goal_position: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., speed_limit: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., torque_limit: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., pid: _Optional[_Union[_component_pb2.PIDGains, _Mapping]] = ...) -> None: ...

class DynamixelMotorStateRequest(_message.Message):
    __slots__ = ("fields", "id")
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.RepeatedScalarFieldContainer[DynamixelMotorField]
    id: _component_pb2.ComponentId
    def __init__(self, fields: _Optional[_Iterable[_Union[DynamixelMotorField, str]]] = ..., id: _Optional[_Union[_component_pb2.ComponentId, _Mapping]] = ...) -> None: ...

class DynamixelMotorStreamStateRequest(_message.Message):
    __slots__ = ("req", "freq")
    REQ_FIELD_NUMBER: _ClassVar[int]
    FREQ_FIELD_NUMBER: _ClassVar[int]
    req: DynamixelMotorStateRequest
    freq: float
    def __init__(self, req: _Optional[_Union[DynamixelMotorStateRequest, _Mapping]] = ..., freq: _Optional[float] = ...) -> None: ...

class DynamixelMotorGoal(_message.Message):
    __slots__ = ("id", "goal_position", "duration")
    ID_FIELD_NUMBER: _ClassVar[int]
    GOAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    id: _component_pb2.ComponentId
    goal_position: _wrappers_pb2.FloatValue
    duration: _wrappers_pb2.FloatValue
    def __init__(self, id: _Optional[_Union[_component_pb2.ComponentId, _Mapping]] = ..., goal_position: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., duration: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class DynamixelMotorCommand(_message.Message):
    __slots__ = ("id", "compliant", "goal_position", "speed_limit", "torque_limit")
    ID_FIELD_NUMBER: _ClassVar[int]
    COMPLIANT_FIELD_NUMBER: _ClassVar[int]
    GOAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    SPEED_LIMIT_FIELD_NUMBER: _ClassVar[int]
    TORQUE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    id: _component_pb2.ComponentId
    compliant: _wrappers_pb2.BoolValue
    goal_position: _wrappers_pb2.FloatValue
    speed_limit: _wrappers_pb2.FloatValue
    torque_limit: _wrappers_pb2.FloatValue
    def __init__(self, id: _Optional[_Union[_component_pb2.ComponentId, _Mapping]] = ..., compliant: _Optional[_Union[_wrappers_pb2.BoolValue, _Mapping]] = ..., goal_position: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., speed_limit: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., torque_limit: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class DynamixelMotorsCommand(_message.Message):
    __slots__ = ("cmd",)
    CMD_FIELD_NUMBER: _ClassVar[int]
    cmd: _containers.RepeatedCompositeFieldContainer[DynamixelMotorCommand]
    def __init__(self, cmd: _Optional[_Iterable[_Union[DynamixelMotorCommand, _Mapping]]] = ...) -> None: ...

class DynamixelMotor(_message.Message):
    __slots__ = ("id", "serial_number")
    ID_FIELD_NUMBER: _ClassVar[int]
    SERIAL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    id: _component_pb2.ComponentId
    serial_number: str
    def __init__(self, id: _Optional[_Union[_component_pb2.ComponentId, _Mapping]] = ..., serial_number: _Optional[str] = ...) -> None: ...

class ListOfDynamixelMotor(_message.Message):
    __slots__ = ("info",)
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: _containers.RepeatedCompositeFieldContainer[DynamixelMotor]
    def __init__(self, info: _Optional[_Iterable[_Union[DynamixelMotor, _Mapping]]] = ...) -> None: ...

class DynamixelMotorStatus(_message.Message):
    __slots__ = ("errors",)
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    errors: _containers.RepeatedCompositeFieldContainer[_error_pb2.Error]
    def __init__(self, errors: _Optional[_Iterable[_Union[_error_pb2.Error, _Mapping]]] = ...) -> None: ...
