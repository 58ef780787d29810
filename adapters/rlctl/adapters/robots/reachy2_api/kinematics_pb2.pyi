from google.protobuf import wrappers_pb2 as _wrappers_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Matrix4x4(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, data: _Optional[_Iterable[float]] = ...) -> None: ...

class Matrix3x3(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, data: _Optional[_Iterable[float]] = ...) -> None: ...

class Quaternion(_message.Message):
    __slots__ = ("w", "x", "y", "z")
    W_FIELD_NUMBER: _ClassVar[int]
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    Z_FIELD_NUMBER: _ClassVar[int]
    w: float
    x: float
    y: float
    z: float
    def __init__(self, w: _Optional[float] = ..., x: _Optional[float] = ..., y: _Optional[float] = ..., z: _Optional[float] = ...) -> None: ...

class Rotation3d(_message.Message):
    __slots__ = ("q", "rpy", "matrix")
    Q_FIELD_NUMBER: _ClassVar[int]
    RPY_FIELD_NUMBER: _ClassVar[int]
    MATRIX_FIELD_NUMBER: _ClassVar[int]
    q: Quaternion
    rpy: ExtEulerAngles
    matrix: Matrix3x3
    def __init__(self, q: _Optional[_Union[Quaternion, _Mapping]] = ..., rpy: _Optional[_Union[ExtEulerAngles, _Mapping]] = ..., matrix: _Optional[_Union[Matrix3x3, _Mapping]] = ...) -> None: ...

class Point(_message.Message):
    __slots__ = ("x", "y", "z")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    Z_FIELD_NUMBER: _ClassVar[int]
    x: float
    y: float
    z: float
    def __init__(self, x: _Optional[float] = ..., y: _Optional[float] = ..., z: _Optional[float] = ...) -> None: ...

class ExtEulerAngles(_message.Message):
    __slots__ = ("roll", "pitch", "yaw")
    ROLL_FIELD_NUMBER: _ClassVar[int]
    PITCH_FIELD_NUMBER: _ClassVar[int]
    YAW_FIELD_NUMBER: _ClassVar[int]
    roll: _wrappers_pb2.FloatValue
    pitch: _wrappers_pb2.FloatValue
    yaw: _wrappers_pb2.FloatValue
    def __init__(self, roll: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., pitch: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., yaw: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class PointDistanceTolerances(_message.Message):
    __slots__ = ("x_tol", "y_tol", "z_tol")
    X_TOL_FIELD_NUMBER: _ClassVar[int]
    Y_TOL_FIELD_NUMBER: _ClassVar[int]
    Z_TOL_FIELD_NUMBER: _ClassVar[int]
    x_tol: float
    y_tol: float
    z_tol: float
    def __init__(self, x_tol: _Optional[float] = ..., y_tol: _Optional[float] = ..., z_tol: _Optional[float] = ...) -> None: ...

class ExtEulerAnglesTolerances(_message.Message):
    __slots__ = ("roll_tol", "pitch_tol", "yaw_tol")
    ROLL_TOL_FIELD_NUMBER: _ClassVar[int]
    PITCH_TOL_FIELD_NUMBER: _ClassVar[int]
    YAW_TOL_FIELD_NUMBER: _ClassVar[int]
    roll_tol: float
    pitch_tol: float
    yaw_tol: float
    def __init__(self, roll_tol: _Optional[float] = ..., pitch_tol: _Optional[float] = ..., yaw_tol: _Optional[float] = ...) -> None: ...
