import datetime

from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from rlctl.adapters.robots.reachy2_api import arm_pb2 as _arm_pb2
from rlctl.adapters.robots.reachy2_api import head_pb2 as _head_pb2
from rlctl.adapters.robots.reachy2_api import hand_pb2 as _hand_pb2
from rlctl.adapters.robots.reachy2_api import mobile_base_utility_pb2 as _mobile_base_utility_pb2
from rlctl.adapters.robots.reachy2_api import tripod_pb2 as _tripod_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReachyCoreMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[ReachyCoreMode]
    FAKE: _ClassVar[ReachyCoreMode]
    REAL: _ClassVar[ReachyCoreMode]
    GAZEBO: _ClassVar[ReachyCoreMode]
    MUJOCO: _ClassVar[ReachyCoreMode]
NONE: ReachyCoreMode
FAKE: ReachyCoreMode
REAL: ReachyCoreMode
GAZEBO: ReachyCoreMode
MUJOCO: ReachyCoreMode

class Reachy(_message.Message):
    __slots__ = ("id", "l_arm", "r_arm", "head", "l_hand", "r_hand", "mobile_base", "tripod", "info")
    ID_FIELD_NUMBER: _ClassVar[int]
    L_ARM_FIELD_NUMBER: _ClassVar[int]
    R_ARM_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    L_HAND_FIELD_NUMBER: _ClassVar[int]
    R_HAND_FIELD_NUMBER: _ClassVar[int]
    MOBILE_BASE_FIELD_NUMBER: _ClassVar[int]
    TRIPOD_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    id: ReachyId
    l_arm: _arm_pb2.Arm
    r_arm: _arm_pb2.Arm
    head: _head_pb2.Head
    l_hand: _hand_pb2.Hand
    r_hand: _hand_pb2.Hand
    mobile_base: _mobile_base_utility_pb2.MobileBase
    tripod: _tripod_pb2.Tripod
    info: ReachyInfo
    def __init__(self, id: _Optional[_Union[ReachyId, _Mapping]] = ..., l_arm: _Optional[_Union[_arm_pb2.Arm, _Mapping]] = ..., r_arm: _Optional[_Union[_arm_pb2.Arm, _Mapping]] = ..., head: _Optional[_Union[_head_pb2.Head, _Mapping]] = ..., l_hand: _Optional[_Union[_hand_pb2.Hand, _Mapping]] = ..., r_hand: _Optional[_Union[_hand_pb2.Hand, _Mapping]] = ..., mobile_base: _Optional[_Union[_mobile_base_utility_pb2.MobileBase, _Mapping]] = ..., tripod: _Optional[_Union[_tripod_pb2.Tripod, _Mapping]] = ..., info: _Optional[_Union[ReachyInfo, _Mapping]] = ...) -> None: ...

class ReachyId(_message.Message):
    __slots__ = ("id", "name")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    id: int
    name: str
    def __init__(self, id: _Optional[int] = ..., name: _Optional[str] = ...) -> None: ...

class ReachyInfo(_message.Message):
    __slots__ = ("serial_number", "version_hard", "version_soft", "api_version", "core_mode")
    SERIAL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    VERSION_HARD_FIELD_NUMBER: _ClassVar[int]
    VERSION_SOFT_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    CORE_MODE_FIELD_NUMBER: _ClassVar[int]
    serial_number: str
    version_hard: str
    version_soft: str
    api_version: str
    core_mode: ReachyCoreMode
    def __init__(self, serial_number: _Optional[str] = ..., version_hard: _Optional[str] = ..., version_soft: _Optional[str] = ..., api_version: _Optional[str] = ..., core_mode: _Optional[_Union[ReachyCoreMode, str]] = ...) -> None: ...

class ReachyState(_message.Message):
    __slots__ = ("timestamp", "id", "l_arm_state", "r_arm_state", "head_state", "l_hand_state", "r_hand_state", "mobile_base_state", "tripod_state")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    L_ARM_STATE_FIELD_NUMBER: _ClassVar[int]
    R_ARM_STATE_FIELD_NUMBER: _ClassVar[int]
    HEAD_STATE_FIELD_NUMBER: _ClassVar[int]
    L_HAND_STATE_FIELD_NUMBER: _ClassVar[int]
    R_HAND_STATE_FIELD_NUMBER: _ClassVar[int]
    MOBILE_BASE_STATE_FIELD_NUMBER: _ClassVar[int]
    TRIPOD_STATE_FIELD_NUMBER: _ClassVar[int]
    timestamp: _timestamp_pb2.Timestamp
    id: ReachyId
    l_arm_state: _arm_pb2.ArmState
    r_arm_state: _arm_pb2.ArmState
    head_state: _head_pb2.HeadState
    l_hand_state: _hand_pb2.HandState
    r_hand_state: _hand_pb2.HandState
    mobile_base_state: _mobile_base_utility_pb2.MobileBaseState
    tripod_state: _tripod_pb2.TripodState
    def __init__(self, timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., id: _Optional[_Union[ReachyId, _Mapping]] = ..., l_arm_state: _Optional[_Union[_arm_pb2.ArmState, _Mapping]] = ..., r_arm_state: _Optional[_Union[_arm_pb2.ArmState, _Mapping]] = ..., head_state: _Optional[_Union[_head_pb2.HeadState, _Mapping]] = ..., l_hand_state: _Optional[_Union[_hand_pb2.HandState, _Mapping]] = ..., r_hand_state: _Optional[_Union[_hand_pb2.HandState, _Mapping]] = ..., mobile_base_state: _Optional[_Union[_mobile_base_utility_pb2.MobileBaseState, _Mapping]] = ..., tripod_state: _Optional[_Union[_tripod_pb2.TripodState, _Mapping]] = ...) -> None: ...

class ReachyStatus(_message.Message):
    __slots__ = ("timestamp", "id", "l_arm_status", "r_arm_status", "head_status", "l_hand_status", "r_hand_status", "mobile_base_status", "tripod_status")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    L_ARM_STATUS_FIELD_NUMBER: _ClassVar[int]
    R_ARM_STATUS_FIELD_NUMBER: _ClassVar[int]
    HEAD_STATUS_FIELD_NUMBER: _ClassVar[int]
    L_HAND_STATUS_FIELD_NUMBER: _ClassVar[int]
    R_HAND_STATUS_FIELD_NUMBER: _ClassVar[int]
    MOBILE_BASE_STATUS_FIELD_NUMBER: _ClassVar[int]
    TRIPOD_STATUS_FIELD_NUMBER: _ClassVar[int]
    timestamp: _timestamp_pb2.Timestamp
    id: ReachyId
    l_arm_status: _arm_pb2.ArmStatus
    r_arm_status: _arm_pb2.ArmStatus
    head_status: _head_pb2.HeadStatus
    l_hand_status: _hand_pb2.HandStatus
    r_hand_status: _hand_pb2.HandStatus
    mobile_base_status: _mobile_base_utility_pb2.MobileBaseStatus
    tripod_status: _tripod_pb2.TripodStatus
    def __init__(self, timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., id: _Optional[_Union[ReachyId, _Mapping]] = ..., l_arm_status: _Optional[_Union[_arm_pb2.ArmStatus, _Mapping]] = ..., r_arm_status: _Optional[_Union[_arm_pb2.ArmStatus, _Mapping]] = ..., head_status: _Optional[_Union[_head_pb2.HeadStatus, _Mapping]] = ..., l_hand_status: _Optional[_Union[_hand_pb2.HandStatus, _Mapping]] = ..., r_hand_status: _Optional[_Union[_hand_pb2.HandStatus, _Mapping]] = ..., mobile_base_status: _Optional[_Union[_mobile_base_utility_pb2.MobileBaseStatus, _Mapping]] = ..., tripod_status: _Optional[_Union[_tripod_pb2.TripodStatus, _Mapping]] = ...) -> None: ...

class ReachyStreamStateRequest(_message.Message):
    __slots__ = ("id", "publish_frequency")
    ID_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    id: ReachyId
    publish_frequency: float
    def __init__(self, id: _Optional[_Union[ReachyId, _Mapping]] = ..., publish_frequency: _Optional[float] = ...) -> None: ...

class ReachyStreamAuditRequest(_message.Message):
    __slots__ = ("id", "publish_frequency")
    ID_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_FREQUENCY_FIELD_NUMBER: _ClassVar[int]
    id: ReachyId
    publish_frequency: float
    def __init__(self, id: _Optional[_Union[ReachyId, _Mapping]] = ..., publish_frequency: _Optional[float] = ...) -> None: ...

class ReachyComponentsCommands(_message.Message):
    __slots__ = ("l_arm_commands", "r_arm_commands", "head_commands", "l_hand_commands", "r_hand_commands")
    L_ARM_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    R_ARM_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    HEAD_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    L_HAND_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    R_HAND_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    l_arm_commands: _arm_pb2.ArmComponentsCommands
    r_arm_commands: _arm_pb2.ArmComponentsCommands
    head_commands: _head_pb2.HeadComponentsCommands
    l_hand_commands: _hand_pb2.HandPositionRequest
    r_hand_commands: _hand_pb2.HandPositionRequest
    def __init__(self, l_arm_commands: _Optional[_Union[_arm_pb2.ArmComponentsCommands, _Mapping]] = ..., r_arm_commands: _Optional[_Union[_arm_pb2.ArmComponentsCommands, _Mapping]] = ..., head_commands: _Optional[_Union[_head_pb2.HeadComponentsCommands, _Mapping]] = ..., l_hand_commands: _Optional[_Union[_hand_pb2.HandPositionRequest, _Mapping]] = ..., r_hand_commands: _Optional[_Union[_hand_pb2.HandPositionRequest, _Mapping]] = ...) -> None: ...
