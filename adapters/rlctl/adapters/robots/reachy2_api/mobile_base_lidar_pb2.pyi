from google.protobuf import wrappers_pb2 as _wrappers_pb2
from rlctl.adapters.robots.reachy2_api import mobile_base_mobility_pb2 as _mobile_base_mobility_pb2
from rlctl.adapters.robots.reachy2_api import part_pb2 as _part_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LidarObstacleDetectionEnum(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DETECTION_ERROR: _ClassVar[LidarObstacleDetectionEnum]
    NO_OBJECT_DETECTED: _ClassVar[LidarObstacleDetectionEnum]
    OBJECT_DETECTED_SLOWDOWN: _ClassVar[LidarObstacleDetectionEnum]
    OBJECT_DETECTED_STOP: _ClassVar[LidarObstacleDetectionEnum]
DETECTION_ERROR: LidarObstacleDetectionEnum
NO_OBJECT_DETECTED: LidarObstacleDetectionEnum
OBJECT_DETECTED_SLOWDOWN: LidarObstacleDetectionEnum
OBJECT_DETECTED_STOP: LidarObstacleDetectionEnum

class LidarObstacleDetectionStatus(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: LidarObstacleDetectionEnum
    def __init__(self, status: _Optional[_Union[LidarObstacleDetectionEnum, str]] = ...) -> None: ...

class LidarSafety(_message.Message):
    __slots__ = ("id", "safety_on", "safety_distance", "critical_distance", "obstacle_detection_status")
    ID_FIELD_NUMBER: _ClassVar[int]
    SAFETY_ON_FIELD_NUMBER: _ClassVar[int]
    SAFETY_DISTANCE_FIELD_NUMBER: _ClassVar[int]
    CRITICAL_DISTANCE_FIELD_NUMBER: _ClassVar[int]
    OBSTACLE_DETECTION_STATUS_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    safety_on: _wrappers_pb2.BoolValue
    safety_distance: _wrappers_pb2.FloatValue
    critical_distance: _wrappers_pb2.FloatValue
    obstacle_detection_status: LidarObstacleDetectionStatus
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., safety_on: _Optional[_Union[_wrappers_pb2.BoolValue, _Mapping]] = ..., safety_distance: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., critical_distance: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., obstacle_detection_status: _Optional[_Union[LidarObstacleDetectionStatus, _Mapping]] = ...) -> None: ...

class LidarMap(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...
