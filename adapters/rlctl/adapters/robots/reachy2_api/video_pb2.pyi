import datetime

from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import wrappers_pb2 as _wrappers_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from rlctl.adapters.robots.reachy2_api import error_pb2 as _error_pb2
from rlctl.adapters.robots.reachy2_api import kinematics_pb2 as _kinematics_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class View(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEFT: _ClassVar[View]
    RIGHT: _ClassVar[View]
    DEPTH: _ClassVar[View]
LEFT: View
RIGHT: View
DEPTH: View

class VideoAck(_message.Message):
    __slots__ = ("success", "error")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    success: _wrappers_pb2.BoolValue
    error: _error_pb2.Error
    def __init__(self, success: _Optional[_Union[_wrappers_pb2.BoolValue, _Mapping]] = ..., error: _Optional[_Union[_error_pb2.Error, _Mapping]] = ...) -> None: ...

class CameraFeatures(_message.Message):
    __slots__ = ("name", "stereo", "depth")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STEREO_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    name: str
    stereo: bool
    depth: bool
    def __init__(self, name: _Optional[str] = ..., stereo: _Optional[bool] = ..., depth: _Optional[bool] = ...) -> None: ...

class CameraParameters(_message.Message):
    __slots__ = ("height", "width", "distortion_model", "D", "K", "R", "P")
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    DISTORTION_MODEL_FIELD_NUMBER: _ClassVar[int]
    D_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    R_FIELD_NUMBER: _ClassVar[int]
    P_FIELD_NUMBER: _ClassVar[int]
    height: int
    width: int
    distortion_model: str
    D: _containers.RepeatedScalarFieldContainer[float]
    K: _containers.RepeatedScalarFieldContainer[float]
    R: _containers.RepeatedScalarFieldContainer[float]
    P: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, height: _Optional[int] = ..., width: _Optional[int] = ..., distortion_model: _Optional[str] = ..., D: _Optional[_Iterable[float]] = ..., K: _Optional[_Iterable[float]] = ..., R: _Optional[_Iterable[float]] = ..., P: _Optional[_Iterable[float]] = ...) -> None: ...

class CameraExtrinsics(_message.Message):
    __slots__ = ("extrinsics",)
    EXTRINSICS_FIELD_NUMBER: _ClassVar[int]
    extrinsics: _kinematics_pb2.Matrix4x4
    def __init__(self, extrinsics: _Optional[_Union[_kinematics_pb2.Matrix4x4, _Mapping]] = ...) -> None: ...

class ListOfCameraFeatures(_message.Message):
    __slots__ = ("camera_feat",)
    CAMERA_FEAT_FIELD_NUMBER: _ClassVar[int]
    camera_feat: _containers.RepeatedCompositeFieldContainer[CameraFeatures]
    def __init__(self, camera_feat: _Optional[_Iterable[_Union[CameraFeatures, _Mapping]]] = ...) -> None: ...

class Frame(_message.Message):
    __slots__ = ("timestamp", "data")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    timestamp: _timestamp_pb2.Timestamp
    data: bytes
    def __init__(self, timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class FrameRaw(_message.Message):
    __slots__ = ("timestamp", "data", "height", "width", "encoding", "step", "isbigendian")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    ISBIGENDIAN_FIELD_NUMBER: _ClassVar[int]
    timestamp: _timestamp_pb2.Timestamp
    data: bytes
    height: int
    width: int
    encoding: str
    step: int
    isbigendian: bool
    def __init__(self, timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., data: _Optional[bytes] = ..., height: _Optional[int] = ..., width: _Optional[int] = ..., encoding: _Optional[str] = ..., step: _Optional[int] = ..., isbigendian: _Optional[bool] = ...) -> None: ...

class ViewRequest(_message.Message):
    __slots__ = ("camera_feat", "view")
    CAMERA_FEAT_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    camera_feat: CameraFeatures
    view: View
    def __init__(self, camera_feat: _Optional[_Union[CameraFeatures, _Mapping]] = ..., view: _Optional[_Union[View, str]] = ...) -> None: ...
