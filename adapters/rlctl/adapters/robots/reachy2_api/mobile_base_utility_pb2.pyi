import datetime

from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import wrappers_pb2 as _wrappers_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from rlctl.adapters.robots.reachy2_api import mobile_base_lidar_pb2 as _mobile_base_lidar_pb2
from rlctl.adapters.robots.reachy2_api import mobile_base_mobility_pb2 as _mobile_base_mobility_pb2
from rlctl.adapters.robots.reachy2_api import error_pb2 as _error_pb2
from rlctl.adapters.robots.reachy2_api import part_pb2 as _part_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ControlModePossiblities(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE_CONTROL_MODE: _ClassVar[ControlModePossiblities]
    OPEN_LOOP: _ClassVar[ControlModePossiblities]
    PID: _ClassVar[ControlModePossiblities]

class ZuuuModePossiblities(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE_ZUUU_MODE: _ClassVar[ZuuuModePossiblities]
    CMD_VEL: _ClassVar[ZuuuModePossiblities]
    BRAKE: _ClassVar[ZuuuModePossiblities]
    FREE_WHEEL: _ClassVar[ZuuuModePossiblities]
    SPEED: _ClassVar[ZuuuModePossiblities]
    GOTO: _ClassVar[ZuuuModePossiblities]
    EMERGENCY_STOP: _ClassVar[ZuuuModePossiblities]
    CMD_GOTO: _ClassVar[ZuuuModePossiblities]
NONE_CONTROL_MODE: ControlModePossiblities
OPEN_LOOP: ControlModePossiblities
PID: ControlModePossiblities
NONE_ZUUU_MODE: ZuuuModePossiblities
CMD_VEL: ZuuuModePossiblities
BRAKE: ZuuuModePossiblities
FREE_WHEEL: ZuuuModePossiblities
SPEED: ZuuuModePossiblities
GOTO: ZuuuModePossiblities
EMERGENCY_STOP: ZuuuModePossiblities
CMD_GOTO: ZuuuModePossiblities

class MobileBase(_message.Message):
    __slots__ = ("part_id", "info")
    PART_ID_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    part_id: _part_pb2.PartId
    info: _part_pb2.PartInfo
    def __init__(self, part_id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., info: _Optional[_Union[_part_pb2.PartInfo, _Mapping]] = ...) -> None: ...

class ListOfMobileBase(_message.Message):
    __slots__ = ("mobile_base",)
    MOBILE_BASE_FIELD_NUMBER: _ClassVar[int]
    mobile_base: _containers.RepeatedCompositeFieldContainer[MobileBase]
    def __init__(self, mobile_base: _Optional[_Iterable[_Union[MobileBase, _Mapping]]] = ...) -> None: ...

class MobileBaseState(_message.Message):
    __slots__ = ("timestamp", "id", "activated", "battery_level", "lidar_safety", "zuuu_mode", "control_mode")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ACTIVATED_FIELD_NUMBER: _ClassVar[int]
    BATTERY_LEVEL_FIELD_NUMBER: _ClassVar[int]
    LIDAR_SAFETY_FIELD_NUMBER: _ClassVar[int]
    ZUUU_MODE_FIELD_NUMBER: _ClassVar[int]
    CONTROL_MODE_FIELD_NUMBER: _ClassVar[int]
    timestamp: _timestamp_pb2.Timestamp
    id: _part_pb2.PartId
    activated: bool
    battery_level: BatteryLevel
    lidar_safety: _mobile_base_lidar_pb2.LidarSafety
    zuuu_mode: ZuuuModeCommand
    control_mode: ControlModeCommand
    def __init__(self, timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., activated: _Optional[bool] = ..., battery_level: _Optional[_Union[BatteryLevel, _Mapping]] = ..., lidar_safety: _Optional[_Union[_mobile_base_lidar_pb2.LidarSafety, _Mapping]] = ..., zuuu_mode: _Optional[_Union[ZuuuModeCommand, _Mapping]] = ..., control_mode: _Optional[_Union[ControlModeCommand, _Mapping]] = ...) -> None: ...

class OdometryVector(_message.Message):
    __slots__ = ("x", "y", "theta", "vx", "vy", "vtheta")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    THETA_FIELD_NUMBER: _ClassVar[int]
    VX_FIELD_NUMBER: _ClassVar[int]
    VY_FIELD_NUMBER: _ClassVar[int]
    VTHETA_FIELD_NUMBER: _ClassVar[int]
    x: _wrappers_pb2.FloatValue
    y: _wrappers_pb2.FloatValue
    theta: _wrappers_pb2.FloatValue
    vx: _wrappers_pb2.FloatValue
    vy: _wrappers_pb2.FloatValue
    vtheta: _wrappers_pb2.FloatValue
    def __init__(self, x: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., y: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., theta: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., vx: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., vy: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., vtheta: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class ControlModeCommand(_message.Message):
    __slots__ = ("id", "mode")
    ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    mode: ControlModePossiblities
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., mode: _Optional[_Union[ControlModePossiblities, str]] = ...) -> None: ...

class ZuuuModeCommand(_message.Message):
    __slots__ = ("id", "mode")
    ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    mode: ZuuuModePossiblities
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., mode: _Optional[_Union[ZuuuModePossiblities, str]] = ...) -> None: ...

class BatteryLevel(_message.Message):
    __slots__ = ("level",)
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    level: _wrappers_pb2.FloatValue
    def __init__(self, level: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class MobileBaseStatus(_message.Message):
    __slots__ = ("errors",)
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    errors: _containers.RepeatedCompositeFieldContainer[_error_pb2.Error]
    def __init__(self, errors: _Optional[_Iterable[_Union[_error_pb2.Error, _Mapping]]] = ...) -> None: ...
