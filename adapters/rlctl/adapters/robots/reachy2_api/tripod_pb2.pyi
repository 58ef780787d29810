from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import wrappers_pb2 as _wrappers_pb2
from rlctl.adapters.robots.reachy2_api import component_pb2 as _component_pb2
from rlctl.adapters.robots.reachy2_api import error_pb2 as _error_pb2
from rlctl.adapters.robots.reachy2_api import part_pb2 as _part_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TripodAxis(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HEIGHT: _ClassVar[TripodAxis]
HEIGHT: TripodAxis

class Tripod(_message.Message):
    __slots__ = ("part_id", "description", "info")
    PART_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    part_id: _part_pb2.PartId
    description: TripodDescription
    info: _part_pb2.PartInfo
    def __init__(self, part_id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., description: _Optional[_Union[TripodDescription, _Mapping]] = ..., info: _Optional[_Union[_part_pb2.PartInfo, _Mapping]] = ...) -> None: ...

class TripodDescription(_message.Message):
    __slots__ = ("height_joint",)
    HEIGHT_JOINT_FIELD_NUMBER: _ClassVar[int]
    height_joint: TripodJoint
    def __init__(self, height_joint: _Optional[_Union[TripodJoint, _Mapping]] = ...) -> None: ...

class TripodJoint(_message.Message):
    __slots__ = ("axis",)
    AXIS_FIELD_NUMBER: _ClassVar[int]
    axis: TripodAxis
    def __init__(self, axis: _Optional[_Union[TripodAxis, str]] = ...) -> None: ...

class TripodJointState(_message.Message):
    __slots__ = ("joint", "present_position", "goal_position")
    JOINT_FIELD_NUMBER: _ClassVar[int]
    PRESENT_POSITION_FIELD_NUMBER: _ClassVar[int]
    GOAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    joint: TripodJoint
    present_position: _wrappers_pb2.FloatValue
    goal_position: _wrappers_pb2.FloatValue
    def __init__(self, joint: _Optional[_Union[TripodJoint, _Mapping]] = ..., present_position: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., goal_position: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class TripodState(_message.Message):
    __slots__ = ("part_id", "height")
    PART_ID_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    part_id: _part_pb2.PartId
    height: TripodJointState
    def __init__(self, part_id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., height: _Optional[_Union[TripodJointState, _Mapping]] = ...) -> None: ...

class TripodStatus(_message.Message):
    __slots__ = ("part_id", "errors")
    PART_ID_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    part_id: _part_pb2.PartId
    errors: _containers.RepeatedCompositeFieldContainer[_error_pb2.Error]
    def __init__(self, part_id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., errors: _Optional[_Iterable[_Union[_error_pb2.Error, _Mapping]]] = ...) -> None: ...

class TripodCommand(_message.Message):
    __slots__ = ("part_id", "height_position")
    PART_ID_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_POSITION_FIELD_NUMBER: _ClassVar[int]
    part_id: _part_pb2.PartId
    height_position: _wrappers_pb2.FloatValue
    def __init__(self, part_id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., height_position: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class TripodJointsLimits(_message.Message):
    __slots__ = ("height_limit",)
    HEIGHT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    height_limit: _component_pb2.JointLimits
    def __init__(self, height_limit: _Optional[_Union[_component_pb2.JointLimits, _Mapping]] = ...) -> None: ...
