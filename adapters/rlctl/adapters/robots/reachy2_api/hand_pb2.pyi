from google.protobuf import wrappers_pb2 as _wrappers_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from rlctl.adapters.robots.reachy2_api import error_pb2 as _error_pb2
from rlctl.adapters.robots.reachy2_api import part_pb2 as _part_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HandType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NO_TYPE: _ClassVar[HandType]
    PARALLEL_GRIPPER: _ClassVar[HandType]

class SpeedLimit(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NO_LIMIT: _ClassVar[SpeedLimit]
    FAST: _ClassVar[SpeedLimit]
    NORMAL: _ClassVar[SpeedLimit]
    SLOW: _ClassVar[SpeedLimit]
NO_TYPE: HandType
PARALLEL_GRIPPER: HandType
NO_LIMIT: SpeedLimit
FAST: SpeedLimit
NORMAL: SpeedLimit
SLOW: SpeedLimit

class Hand(_message.Message):
    __slots__ = ("part_id", "type", "info")
    PART_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    part_id: _part_pb2.PartId
    type: HandType
    info: _part_pb2.PartInfo
    def __init__(self, part_id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., type: _Optional[_Union[HandType, str]] = ..., info: _Optional[_Union[_part_pb2.PartInfo, _Mapping]] = ...) -> None: ...

class ListOfHand(_message.Message):
    __slots__ = ("hand",)
    HAND_FIELD_NUMBER: _ClassVar[int]
    hand: _containers.RepeatedCompositeFieldContainer[Hand]
    def __init__(self, hand: _Optional[_Iterable[_Union[Hand, _Mapping]]] = ...) -> None: ...

class HandState(_message.Message):
    __slots__ = ("opening", "force", "holding_object", "joints_limits", "temperatures", "present_position", "goal_position", "compliant")
    OPENING_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    HOLDING_OBJECT_FIELD_NUMBER: _ClassVar[int]
    JOINTS_LIMITS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURES_FIELD_NUMBER: _ClassVar[int]
    PRESENT_POSITION_FIELD_NUMBER: _ClassVar[int]
    GOAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    COMPLIANT_FIELD_NUMBER: _ClassVar[int]
    opening: _wrappers_pb2.FloatValue
    force: _wrappers_pb2.FloatValue
    holding_object: _wrappers_pb2.BoolValue
    joints_limits: JointsLimits
    temperatures: HandTemperatures
    present_position: HandPosition
    goal_position: HandPosition
    compliant: _wrappers_pb2.BoolValue
    def __init__(self, opening: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., force: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., holding_object: _Optional[_Union[_wrappers_pb2.BoolValue, _Mapping]] = ..., joints_limits: _Optional[_Union[JointsLimits, _Mapping]] = ..., temperatures: _Optional[_Union[HandTemperatures, _Mapping]] = ..., present_position: _Optional[_Union[HandPosition, _Mapping]] = ..., goal_position: _Optional[_Union[HandPosition, _Mapping]] = ..., compliant: _Optional[_Union[_wrappers_pb2.BoolValue, _Mapping]] = ...) -> None: ...

class HandStatus(_message.Message):
    __slots__ = ("errors",)
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    errors: _containers.RepeatedCompositeFieldContainer[_error_pb2.Error]
    def __init__(self, errors: _Optional[_Iterable[_Union[_error_pb2.Error, _Mapping]]] = ...) -> None: ...

class Force(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class JointLimits(_message.Message):
    __slots__ = ("min", "max")
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    min: float
    max: float
    def __init__(self, min: _Optional[float] = ..., max: _Optional[float] = ...) -> None: ...

class ParallelGripperLimits(_message.Message):
    __slots__ = ("limits",)
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    limits: JointLimits
    def __init__(self, limits: _Optional[_Union[JointLimits, _Mapping]] = ...) -> None: ...

class JointsLimits(_message.Message):
    __slots__ = ("parallel_gripper",)
    PARALLEL_GRIPPER_FIELD_NUMBER: _ClassVar[int]
    parallel_gripper: ParallelGripperLimits
    def __init__(self, parallel_gripper: _Optional[_Union[ParallelGripperLimits, _Mapping]] = ...) -> None: ...

class ParallelGripperPosition(_message.Message):
    __slots__ = ("opening_percentage", "position")
    OPENING_PERCENTAGE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    opening_percentage: _wrappers_pb2.FloatValue
    position: _wrappers_pb2.FloatValue
    def __init__(self, opening_percentage: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., position: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class HandPosition(_message.Message):
    __slots__ = ("parallel_gripper",)
    PARALLEL_GRIPPER_FIELD_NUMBER: _ClassVar[int]
    parallel_gripper: ParallelGripperPosition
    def __init__(self, parallel_gripper: _Optional[_Union[ParallelGripperPosition, _Mapping]] = ...) -> None: ...

class HandPositionRequest(_message.Message):
    __slots__ = ("id", "position")
    ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    position: HandPosition
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., position: _Optional[_Union[HandPosition, _Mapping]] = ...) -> None: ...

class HandJointGoal(_message.Message):
    __slots__ = ("goal_request", "duration")
    GOAL_REQUEST_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    goal_request: HandPositionRequest
    duration: _wrappers_pb2.FloatValue
    def __init__(self, goal_request: _Optional[_Union[HandPositionRequest, _Mapping]] = ..., duration: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class Temperatures(_message.Message):
    __slots__ = ("motor", "driver")
    MOTOR_FIELD_NUMBER: _ClassVar[int]
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    motor: float
    driver: float
    def __init__(self, motor: _Optional[float] = ..., driver: _Optional[float] = ...) -> None: ...

class ParallelGripperTemperature(_message.Message):
    __slots__ = ("temperature",)
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    temperature: Temperatures
    def __init__(self, temperature: _Optional[_Union[Temperatures, _Mapping]] = ...) -> None: ...

class HandTemperatures(_message.Message):
    __slots__ = ("parallel_gripper",)
    PARALLEL_GRIPPER_FIELD_NUMBER: _ClassVar[int]
    parallel_gripper: Temperatures
    def __init__(self, parallel_gripper: _Optional[_Union[Temperatures, _Mapping]] = ...) -> None: ...

class SpeedLimitRequest(_message.Message):
    __slots__ = ("id", "limit")
    ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    limit: SpeedLimit
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., limit: _Optional[_Union[SpeedLimit, str]] = ...) -> None: ...
