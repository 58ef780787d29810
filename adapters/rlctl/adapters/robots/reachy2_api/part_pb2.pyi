from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class PartId(_message.Message):
    __slots__ = ("id", "name")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    id: int
    name: str
    def __init__(self, id: _Optional[int] = ..., name: _Optional[str] = ...) -> None: ...

class PartInfo(_message.Message):
    __slots__ = ("serial_number", "version_hard", "version_soft")
    SERIAL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    VERSION_HARD_FIELD_NUMBER: _ClassVar[int]
    VERSION_SOFT_FIELD_NUMBER: _ClassVar[int]
    serial_number: str
    version_hard: str
    version_soft: str
    def __init__(self, serial_number: _Optional[str] = ..., version_hard: _Optional[str] = ..., version_soft: _Optional[str] = ...) -> None: ...
