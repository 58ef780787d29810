import datetime

from google.protobuf import wrappers_pb2 as _wrappers_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from rlctl.adapters.robots.reachy2_api import part_pb2 as _part_pb2
from rlctl.adapters.robots.reachy2_api import kinematics_pb2 as _kinematics_pb2
from rlctl.adapters.robots.reachy2_api import error_pb2 as _error_pb2
from rlctl.adapters.robots.reachy2_api import component_pb2 as _component_pb2
from rlctl.adapters.robots.reachy2_api import orbita3d_pb2 as _orbita3d_pb2
from rlctl.adapters.robots.reachy2_api import dynamixel_motor_pb2 as _dynamixel_motor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HeadField(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[HeadField]
    NAME: _ClassVar[HeadField]
    ID: _ClassVar[HeadField]
    PRESENT_POSITION: _ClassVar[HeadField]
    PRESENT_SPEED: _ClassVar[HeadField]
    PRESENT_LOAD: _ClassVar[HeadField]
    TEMPERATURE: _ClassVar[HeadField]
    JOINT_LIMITS: _ClassVar[HeadField]
    COMPLIANT: _ClassVar[HeadField]
    GOAL_POSITION: _ClassVar[HeadField]
    SPEED_LIMIT: _ClassVar[HeadField]
    TORQUE_LIMIT: _ClassVar[HeadField]
    PID: _ClassVar[HeadField]
    ALL: _ClassVar[HeadField]

class NeckJoints(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLL: _ClassVar[NeckJoints]
    PITCH: _ClassVar[NeckJoints]
    YAW: _ClassVar[NeckJoints]
NONE: HeadField
NAME: HeadField
ID: HeadField
PRESENT_POSITION: HeadField
PRESENT_SPEED: HeadField
PRESENT_LOAD: HeadField
TEMPERATURE: HeadField
JOINT_LIMITS: HeadField
COMPLIANT: HeadField
GOAL_POSITION: HeadField
SPEED_LIMIT: HeadField
TORQUE_LIMIT: HeadField
PID: HeadField
ALL: HeadField
ROLL: NeckJoints
PITCH: NeckJoints
YAW: NeckJoints

class CustomNeckJoints(_message.Message):
    __slots__ = ("joints",)
    JOINTS_FIELD_NUMBER: _ClassVar[int]
    joints: _containers.RepeatedScalarFieldContainer[NeckJoints]
    def __init__(self, joints: _Optional[_Iterable[_Union[NeckJoints, str]]] = ...) -> None: ...

class Head(_message.Message):
    __slots__ = ("part_id", "description", "info")
    PART_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    part_id: _part_pb2.PartId
    description: HeadDescription
    info: _part_pb2.PartInfo
    def __init__(self, part_id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., description: _Optional[_Union[HeadDescription, _Mapping]] = ..., info: _Optional[_Union[_part_pb2.PartInfo, _Mapping]] = ...) -> None: ...

class HeadDescription(_message.Message):
    __slots__ = ("neck", "l_antenna", "r_antenna")
    NECK_FIELD_NUMBER: _ClassVar[int]
    L_ANTENNA_FIELD_NUMBER: _ClassVar[int]
    R_ANTENNA_FIELD_NUMBER: _ClassVar[int]
    neck: _orbita3d_pb2.Orbita3d
    l_antenna: _dynamixel_motor_pb2.DynamixelMotor
    r_antenna: _dynamixel_motor_pb2.DynamixelMotor
    def __init__(self, neck: _Optional[_Union[_orbita3d_pb2.Orbita3d, _Mapping]] = ..., l_antenna: _Optional[_Union[_dynamixel_motor_pb2.DynamixelMotor, _Mapping]] = ..., r_antenna: _Optional[_Union[_dynamixel_motor_pb2.DynamixelMotor, _Mapping]] = ...) -> None: ...

class ListOfHead(_message.Message):
    __slots__ = ("head",)
    HEAD_FIELD_NUMBER: _ClassVar[int]
    head: _containers.RepeatedCompositeFieldContainer[Head]
    def __init__(self, head: _Optional[_Iterable[_Union[Head, _Mapping]]] = ...) -> None: ...

class HeadState(_message.Message):
    __slots__ = ("timestamp", "id", "activated", "neck_state", "l_antenna_state", "r_antenna_state")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ACTIVATED_FIELD_NUMBER: _ClassVar[int]
    NECK_STATE_FIELD_NUMBER: _ClassVar[int]
    L_ANTENNA_STATE_FIELD_NUMBER: _ClassVar[int]
    R_ANTENNA_STATE_FIELD_NUMBER: _ClassVar[int]
    timestamp: _timestamp_pb2.Timestamp
    id: _part_pb2.PartId
    activated: bool
    neck_state: _orbita3d_pb2.Orbita3dState
    l_antenna_state: _dynamixel_motor_pb2.DynamixelMotorState
    r_antenna_state: _dynamixel_motor_pb2.DynamixelMotorState
    def __init__(self, timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., activated: _Optional[bool] = ..., neck_state: _Optional[_Union[_orbita3d_pb2.Orbita3dState, _Mapping]] = ..., l_antenna_state: _Optional[_Union[_dynamixel_motor_pb2.DynamixelMotorState, _Mapping]] = ..., r_antenna_state: _Optional[_Union[_dynamixel_motor_pb2.DynamixelMotorState, _Mapping]] = ...) -> None: ...

class HeadPosition(_message.Message):
    __slots__ = ("neck_position", "l_antenna_position", "r_antenna_position")
    NECK_POSITION_FIELD_NUMBER: _ClassVar[int]
    L_ANTENNA_POSITION_FIELD_NUMBER: _ClassVar[int]
    R_ANTENNA_POSITION_FIELD_NUMBER: _ClassVar[int]
    neck_position: _kinematics_pb2.Rotation3d
    l_antenna_position: _wrappers_pb2.FloatValue
    r_antenna_position: _wrappers_pb2.FloatValue
    def __init__(self, neck_position: _Optional[_Union[_kinematics_pb2.Rotation3d, _Mapping]] = ..., l_antenna_position: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., r_antenna_position: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class NeckCartesianGoal(_message.Message):
    __slots__ = ("id", "point", "duration")
    ID_FIELD_NUMBER: _ClassVar[int]
    POINT_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    point: _kinematics_pb2.Point
    duration: _wrappers_pb2.FloatValue
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., point: _Optional[_Union[_kinematics_pb2.Point, _Mapping]] = ..., duration: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class NeckJointGoal(_message.Message):
    __slots__ = ("id", "joints_goal", "duration")
    ID_FIELD_NUMBER: _ClassVar[int]
    JOINTS_GOAL_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    joints_goal: NeckOrientation
    duration: _wrappers_pb2.FloatValue
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., joints_goal: _Optional[_Union[NeckOrientation, _Mapping]] = ..., duration: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class AntennaJointGoal(_message.Message):
    __slots__ = ("id", "antenna", "joint_goal", "duration")
    ID_FIELD_NUMBER: _ClassVar[int]
    ANTENNA_FIELD_NUMBER: _ClassVar[int]
    JOINT_GOAL_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    antenna: _dynamixel_motor_pb2.DynamixelMotor
    joint_goal: _wrappers_pb2.FloatValue
    duration: _wrappers_pb2.FloatValue
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., antenna: _Optional[_Union[_dynamixel_motor_pb2.DynamixelMotor, _Mapping]] = ..., joint_goal: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., duration: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class NeckOrientation(_message.Message):
    __slots__ = ("rotation",)
    ROTATION_FIELD_NUMBER: _ClassVar[int]
    rotation: _kinematics_pb2.Rotation3d
    def __init__(self, rotation: _Optional[_Union[_kinematics_pb2.Rotation3d, _Mapping]] = ...) -> None: ...

class NeckFKRequest(_message.Message):
    __slots__ = ("id", "position")
    ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    position: HeadPosition
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., position: _Optional[_Union[HeadPosition, _Mapping]] = ...) -> None: ...

class NeckFKSolution(_message.Message):
    __slots__ = ("success", "orientation")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ORIENTATION_FIELD_NUMBER: _ClassVar[int]
    success: bool
    orientation: NeckOrientation
    def __init__(self, success: _Optional[bool] = ..., orientation: _Optional[_Union[NeckOrientation, _Mapping]] = ...) -> None: ...

class NeckIKRequest(_message.Message):
    __slots__ = ("id", "target", "q0")
    ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    Q0_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    target: NeckOrientation
    q0: _kinematics_pb2.Rotation3d
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., target: _Optional[_Union[NeckOrientation, _Mapping]] = ..., q0: _Optional[_Union[_kinematics_pb2.Rotation3d, _Mapping]] = ...) -> None: ...

class NeckIKSolution(_message.Message):
    __slots__ = ("success", "position", "error")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    success: bool
    position: _kinematics_pb2.Rotation3d
    error: _error_pb2.Error
    def __init__(self, success: _Optional[bool] = ..., position: _Optional[_Union[_kinematics_pb2.Rotation3d, _Mapping]] = ..., error: _Optional[_Union[_error_pb2.Error, _Mapping]] = ...) -> None: ...

class HeadStatus(_message.Message):
    __slots__ = ("neck_status", "l_antenna_status", "r_antenna_status")
    NECK_STATUS_FIELD_NUMBER: _ClassVar[int]
    L_ANTENNA_STATUS_FIELD_NUMBER: _ClassVar[int]
    R_ANTENNA_STATUS_FIELD_NUMBER: _ClassVar[int]
    neck_status: _orbita3d_pb2.Orbita3dStatus
    l_antenna_status: _dynamixel_motor_pb2.DynamixelMotorStatus
    r_antenna_status: _dynamixel_motor_pb2.DynamixelMotorStatus
    def __init__(self, neck_status: _Optional[_Union[_orbita3d_pb2.Orbita3dStatus, _Mapping]] = ..., l_antenna_status: _Optional[_Union[_dynamixel_motor_pb2.DynamixelMotorStatus, _Mapping]] = ..., r_antenna_status: _Optional[_Union[_dynamixel_motor_pb2.DynamixelMotorStatus, _Mapping]] = ...) -> None: ...

class SpeedLimitRequest(_message.Message):
    __slots__ = ("id", "limit")
    ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    limit: int
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., limit: _Optional[int] = ...) -> None: ...

class TorqueLimitRequest(_message.Message):
    __slots__ = ("id", "limit")
    ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    limit: int
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., limit: _Optional[int] = ...) -> None: ...

class JointsLimits(_message.Message):
    __slots__ = ("neck_limits", "l_antenna_limits", "r_antenna_limits")
    NECK_LIMITS_FIELD_NUMBER: _ClassVar[int]
    L_ANTENNA_LIMITS_FIELD_NUMBER: _ClassVar[int]
    R_ANTENNA_LIMITS_FIELD_NUMBER: _ClassVar[int]
    neck_limits: _orbita3d_pb2.Limits3d
    l_antenna_limits: _component_pb2.JointLimits
    r_antenna_limits: _component_pb2.JointLimits
    def __init__(self, neck_limits: _Optional[_Union[_orbita3d_pb2.Limits3d, _Mapping]] = ..., l_antenna_limits: _Optional[_Union[_component_pb2.JointLimits, _Mapping]] = ..., r_antenna_limits: _Optional[_Union[_component_pb2.JointLimits, _Mapping]] = ...) -> None: ...

class HeadTemperatures(_message.Message):
    __slots__ = ("neck_temperature", "l_antenna_temperature", "r_antenna_temperature")
    NECK_TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    L_ANTENNA_TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    R_ANTENNA_TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    neck_temperature: _orbita3d_pb2.Float3d
    l_antenna_temperature: float
    r_antenna_temperature: float
    def __init__(self, neck_temperature: _Optional[_Union[_orbita3d_pb2.Float3d, _Mapping]] = ..., l_antenna_temperature: _Optional[float] = ..., r_antenna_temperature: _Optional[float] = ...) -> None: ...

class HeadComponentsCommands(_message.Message):
    __slots__ = ("neck_command", "l_antenna_command", "r_antenna_command")
    NECK_COMMAND_FIELD_NUMBER: _ClassVar[int]
    L_ANTENNA_COMMAND_FIELD_NUMBER: _ClassVar[int]
    R_ANTENNA_COMMAND_FIELD_NUMBER: _ClassVar[int]
    neck_command: _orbita3d_pb2.Orbita3dsCommand
    l_antenna_command: _dynamixel_motor_pb2.DynamixelMotorsCommand
    r_antenna_command: _dynamixel_motor_pb2.DynamixelMotorsCommand
    def __init__(self, neck_command: _Optional[_Union[_orbita3d_pb2.Orbita3dsCommand, _Mapping]] = ..., l_antenna_command: _Optional[_Union[_dynamixel_motor_pb2.DynamixelMotorsCommand, _Mapping]] = ..., r_antenna_command: _Optional[_Union[_dynamixel_motor_pb2.DynamixelMotorsCommand, _Mapping]] = ...) -> None: ...
