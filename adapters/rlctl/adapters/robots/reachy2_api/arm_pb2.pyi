import datetime

from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import wrappers_pb2 as _wrappers_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from rlctl.adapters.robots.reachy2_api import part_pb2 as _part_pb2
from rlctl.adapters.robots.reachy2_api import kinematics_pb2 as _kinematics_pb2
from rlctl.adapters.robots.reachy2_api import error_pb2 as _error_pb2
from rlctl.adapters.robots.reachy2_api import orbita2d_pb2 as _orbita2d_pb2
from rlctl.adapters.robots.reachy2_api import orbita3d_pb2 as _orbita3d_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ArmField(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[ArmField]
    NAME: _ClassVar[ArmField]
    ID: _ClassVar[ArmField]
    PRESENT_POSITION: _ClassVar[ArmField]
    PRESENT_SPEED: _ClassVar[ArmField]
    PRESENT_LOAD: _ClassVar[ArmField]
    TEMPERATURE: _ClassVar[ArmField]
    JOINT_LIMITS: _ClassVar[ArmField]
    COMPLIANT: _ClassVar[ArmField]
    GOAL_POSITION: _ClassVar[ArmField]
    SPEED_LIMIT: _ClassVar[ArmField]
    TORQUE_LIMIT: _ClassVar[ArmField]
    PID: _ClassVar[ArmField]
    ALL: _ClassVar[ArmField]

class ArmJoints(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SHOULDER_PITCH: _ClassVar[ArmJoints]
    SHOULDER_ROLL: _ClassVar[ArmJoints]
    ELBOW_YAW: _ClassVar[ArmJoints]
    ELBOW_PITCH: _ClassVar[ArmJoints]
    WRIST_ROLL: _ClassVar[ArmJoints]
    WRIST_PITCH: _ClassVar[ArmJoints]
    WRIST_YAW: _ClassVar[ArmJoints]

class IKConstrainedMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNDEFINED_CONSTRAINED_MODE: _ClassVar[IKConstrainedMode]
    UNCONSTRAINED: _ClassVar[IKConstrainedMode]
    LOW_ELBOW: _ClassVar[IKConstrainedMode]

class IKContinuousMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNDEFINED_CONTINUOUS_MODE: _ClassVar[IKContinuousMode]
    CONTINUOUS: _ClassVar[IKContinuousMode]
    DISCRETE: _ClassVar[IKContinuousMode]
    UNFREEZE: _ClassVar[IKContinuousMode]

class ReachabilityError(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NO_ERROR: _ClassVar[ReachabilityError]
    DISTANCE_LIMIT: _ClassVar[ReachabilityError]
    SHOULDER_LIMIT: _ClassVar[ReachabilityError]
    ELBOW_LIMIT: _ClassVar[ReachabilityError]
    WRIST_LIMIT: _ClassVar[ReachabilityError]
    SINGULARITY_AVOIDANCE: _ClassVar[ReachabilityError]
    DISCONTINUITY_FREEZE: _ClassVar[ReachabilityError]
    MULTITURN_FREEZE: _ClassVar[ReachabilityError]
    OTHER: _ClassVar[ReachabilityError]
NONE: ArmField
NAME: ArmField
ID: ArmField
PRESENT_POSITION: ArmField
PRESENT_SPEED: ArmField
PRESENT_LOAD: ArmField
TEMPERATURE: ArmField
JOINT_LIMITS: ArmField
COMPLIANT: ArmField
GOAL_POSITION: ArmField
SPEED_LIMIT: ArmField
TORQUE_LIMIT: ArmField
PID: ArmField
ALL: ArmField
SHOULDER_PITCH: ArmJoints
SHOULDER_ROLL: ArmJoints
ELBOW_YAW: ArmJoints
ELBOW_PITCH: ArmJoints
WRIST_ROLL: ArmJoints
WRIST_PITCH: ArmJoints
WRIST_YAW: ArmJoints
UNDEFINED_CONSTRAINED_MODE: IKConstrainedMode
UNCONSTRAINED: IKConstrainedMode
LOW_ELBOW: IKConstrainedMode
UNDEFINED_CONTINUOUS_MODE: IKContinuousMode
CONTINUOUS: IKContinuousMode
DISCRETE: IKContinuousMode
UNFREEZE: IKContinuousMode
NO_ERROR: ReachabilityError
DISTANCE_LIMIT: ReachabilityError
SHOULDER_LIMIT: ReachabilityError
ELBOW_LIMIT: ReachabilityError
WRIST_LIMIT: ReachabilityError
SINGULARITY_AVOIDANCE: ReachabilityError
DISCONTINUITY_FREEZE: ReachabilityError
MULTITURN_FREEZE: ReachabilityError
OTHER: ReachabilityError

class CustomArmJoints(_message.Message):
    __slots__ = ("joints",)
    JOINTS_FIELD_NUMBER: _ClassVar[int]
    joints: _containers.RepeatedScalarFieldContainer[ArmJoints]
    def __init__(self, joints: _Optional[_Iterable[_Union[ArmJoints, str]]] = ...) -> None: ...

class ArmState(_message.Message):
    __slots__ = ("timestamp", "id", "activated", "shoulder_state", "elbow_state", "wrist_state", "reachability")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ACTIVATED_FIELD_NUMBER: _ClassVar[int]
    SHOULDER_STATE_FIELD_NUMBER: _ClassVar[int]
    ELBOW_STATE_FIELD_NUMBER: _ClassVar[int]
    WRIST_STATE_FIELD_NUMBER: _ClassVar[int]
    REACHABILITY_FIELD_NUMBER: _ClassVar[int]
    timestamp: _timestamp_pb2.Timestamp
    id: _part_pb2.PartId
    activated: bool
    shoulder_state: _orbita2d_pb2.Orbita2dState
    elbow_state: _orbita2d_pb2.Orbita2dState
    wrist_state: _orbita3d_pb2.Orbita3dState
    reachability: _containers.RepeatedCompositeFieldContainer[ReachabilityAnswer]
    def __init__(self, timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., activated: _Optional[bool] = ..., shoulder_state: _Optional[_Union[_orbita2d_pb2.Orbita2dState, _Mapping]] = ..., elbow_state: _Optional[_Union[_orbita2d_pb2.Orbita2dState, _Mapping]] = ..., wrist_state: _Optional[_Union[_orbita3d_pb2.Orbita3dState, _Mapping]] = ..., reachability: _Optional[_Iterable[_Union[ReachabilityAnswer, _Mapping]]] = ...) -> None: ...

class ReachabilityAnswer(_message.Message):
    __slots__ = ("order_id", "is_reachable", "description")
    ORDER_ID_FIELD_NUMBER: _ClassVar[int]
    IS_REACHABLE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    order_id: _wrappers_pb2.Int32Value
    is_reachable: _wrappers_pb2.BoolValue
    description: ReachabilityError
    def __init__(self, order_id: _Optional[_Union[_wrappers_pb2.Int32Value, _Mapping]] = ..., is_reachable: _Optional[_Union[_wrappers_pb2.BoolValue, _Mapping]] = ..., description: _Optional[_Union[ReachabilityError, str]] = ...) -> None: ...

class ArmDescription(_message.Message):
    __slots__ = ("shoulder", "elbow", "wrist")
    SHOULDER_FIELD_NUMBER: _ClassVar[int]
    ELBOW_FIELD_NUMBER: _ClassVar[int]
    WRIST_FIELD_NUMBER: _ClassVar[int]
    shoulder: _orbita2d_pb2.Orbita2d
    elbow: _orbita2d_pb2.Orbita2d
    wrist: _orbita3d_pb2.Orbita3d
    def __init__(self, shoulder: _Optional[_Union[_orbita2d_pb2.Orbita2d, _Mapping]] = ..., elbow: _Optional[_Union[_orbita2d_pb2.Orbita2d, _Mapping]] = ..., wrist: _Optional[_Union[_orbita3d_pb2.Orbita3d, _Mapping]] = ...) -> None: ...

class Arm(_message.Message):
    __slots__ = ("part_id", "description", "info")
    PART_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    part_id: _part_pb2.PartId
    description: ArmDescription
    info: _part_pb2.PartInfo
    def __init__(self, part_id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., description: _Optional[_Union[ArmDescription, _Mapping]] = ..., info: _Optional[_Union[_part_pb2.PartInfo, _Mapping]] = ...) -> None: ...

class ListOfArm(_message.Message):
    __slots__ = ("arm",)
    ARM_FIELD_NUMBER: _ClassVar[int]
    arm: _containers.RepeatedCompositeFieldContainer[Arm]
    def __init__(self, arm: _Optional[_Iterable[_Union[Arm, _Mapping]]] = ...) -> None: ...

class ArmPosition(_message.Message):
    __slots__ = ("shoulder_position", "elbow_position", "wrist_position")
    SHOULDER_POSITION_FIELD_NUMBER: _ClassVar[int]
    ELBOW_POSITION_FIELD_NUMBER: _ClassVar[int]
    WRIST_POSITION_FIELD_NUMBER: _ClassVar[int]
    shoulder_position: _orbita2d_pb2.Pose2d
    elbow_position: _orbita2d_pb2.Pose2d
    wrist_position: _kinematics_pb2.Rotation3d
    def __init__(self, shoulder_position: _Optional[_Union[_orbita2d_pb2.Pose2d, _Mapping]] = ..., elbow_position: _Optional[_Union[_orbita2d_pb2.Pose2d, _Mapping]] = ..., wrist_position: _Optional[_Union[_kinematics_pb2.Rotation3d, _Mapping]] = ...) -> None: ...

class ArmCartesianGoal(_message.Message):
    __slots__ = ("id", "goal_pose", "position_tolerance", "orientation_tolerance", "q0", "constrained_mode", "preferred_theta", "d_theta_max", "continuous_mode", "duration", "order_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    GOAL_POSE_FIELD_NUMBER: _ClassVar[int]
    POSITION_TOLERANCE_FIELD_NUMBER: _ClassVar[int]
    ORIENTATION_TOLERANCE_FIELD_NUMBER: _ClassVar[int]
    Q0_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINED_MODE_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_THETA_FIELD_NUMBER: _ClassVar[int]
    D_THETA_MAX_FIELD_NUMBER: _ClassVar[int]
    CONTINUOUS_MODE_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    ORDER_ID_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    goal_pose: _kinematics_pb2.Matrix4x4
    position_tolerance: _kinematics_pb2.PointDistanceTolerances
    orientation_tolerance: _kinematics_pb2.ExtEulerAnglesTolerances
    q0: ArmPosition
    constrained_mode: IKConstrainedMode
    preferred_theta: _wrappers_pb2.FloatValue
    d_theta_max: _wrappers_pb2.FloatValue
    continuous_mode: IKContinuousMode
    duration: _wrappers_pb2.FloatValue
    order_id: _wrappers_pb2.Int32Value
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., goal_pose: _Optional[_Union[_kinematics_pb2.Matrix4x4, _Mapping]] = ..., position_tolerance: _Optional[_Union[_kinematics_pb2.PointDistanceTolerances, _Mapping]] = ..., orientation_tolerance: _Optional[_Union[_kinematics_pb2.ExtEulerAnglesTolerances, _Mapping]] = ..., q0: _Optional[_Union[ArmPosition, _Mapping]] = ..., constrained_mode: _Optional[_Union[IKConstrainedMode, str]] = ..., preferred_theta: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., d_theta_max: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., continuous_mode: _Optional[_Union[IKContinuousMode, str]] = ..., duration: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ..., order_id: _Optional[_Union[_wrappers_pb2.Int32Value, _Mapping]] = ...) -> None: ...

class ArmJointGoal(_message.Message):
    __slots__ = ("id", "joints_goal", "duration")
    ID_FIELD_NUMBER: _ClassVar[int]
    JOINTS_GOAL_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    joints_goal: ArmPosition
    duration: _wrappers_pb2.FloatValue
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., joints_goal: _Optional[_Union[ArmPosition, _Mapping]] = ..., duration: _Optional[_Union[_wrappers_pb2.FloatValue, _Mapping]] = ...) -> None: ...

class ArmEndEffector(_message.Message):
    __slots__ = ("pose",)
    POSE_FIELD_NUMBER: _ClassVar[int]
    pose: _kinematics_pb2.Matrix4x4
    def __init__(self, pose: _Optional[_Union[_kinematics_pb2.Matrix4x4, _Mapping]] = ...) -> None: ...

class ArmFKRequest(_message.Message):
    __slots__ = ("id", "position")
    ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    position: ArmPosition
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., position: _Optional[_Union[ArmPosition, _Mapping]] = ...) -> None: ...

class ArmFKSolution(_message.Message):
    __slots__ = ("success", "end_effector")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    END_EFFECTOR_FIELD_NUMBER: _ClassVar[int]
    success: bool
    end_effector: ArmEndEffector
    def __init__(self, success: _Optional[bool] = ..., end_effector: _Optional[_Union[ArmEndEffector, _Mapping]] = ...) -> None: ...

class ArmIKRequest(_message.Message):
    __slots__ = ("id", "target", "q0")
    ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    Q0_FIELD_NUMBER: _ClassVar[int]
    id: _part_pb2.PartId
    target: ArmEndEffector
    q0: ArmPosition
    def __init__(self, id: _Optional[_Union[_part_pb2.PartId, _Mapping]] = ..., target: _Optional[_Union[ArmEndEffector, _Mapping]] = ..., q0: _Optional[_Union[ArmPosition, _Mapping]] = ...) -> None: ...

class ArmIKSolution(_message.Message):
    __slots__ = ("success", "arm_position", "error")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ARM_POSITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    success: bool
    arm_position: ArmPosition
    error: _error_pb2.Error
    def __init__(self, success: _Optional[bool] = ..., arm_position: _Optional[_Union[ArmPosition, _Mapping]] = ..., error: _Optional[_Union[_error_pb2.Error, _Mapping]] = ...) -> None: ...

class ArmStatus(_message.Message):
    __slots__ = ("shoulder_status", "elbow_status", "wrist_status")
    SHOULDER_STATUS_FIELD_NUMBER: _ClassVar[int]
    ELBOW_STATUS_FIELD_NUMBER: _ClassVar[int]
    WRIST_STATUS_FIELD_NUMBER: _ClassVar[int]
    shoulder_status: _orbita2d_pb2.Orbita2dStatus
    elbow_status: _orbita2d_pb2.Orbita2dStatus
    wrist_status: _orbita3d_pb2.Orbita3dStatus
    def __init__(self, shoulder_status: _Optional[_Union[_orbita2d_pb2.Orbita2dStatus, _Mapping]] = ..., elbow_status: _Optional[_Union[_orbita2d_pb2.Orbita2dStatus, _Mapping]] = ..., wrist_status: _Optional[_Union[_orbita3d_pb2.Orbita3dStatus, _Mapping]] = ...) -> None: ...

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

class ArmLimits(_message.Message):
    __slots__ = ("shoulder_limits", "elbow_limits", "wrist_limits")
    SHOULDER_LIMITS_FIELD_NUMBER: _ClassVar[int]
    ELBOW_LIMITS_FIELD_NUMBER: _ClassVar[int]
    WRIST_LIMITS_FIELD_NUMBER: _ClassVar[int]
    shoulder_limits: _orbita2d_pb2.Limits2d
    elbow_limits: _orbita2d_pb2.Limits2d
    wrist_limits: _orbita3d_pb2.Limits3d
    def __init__(self, shoulder_limits: _Optional[_Union[_orbita2d_pb2.Limits2d, _Mapping]] = ..., elbow_limits: _Optional[_Union[_orbita2d_pb2.Limits2d, _Mapping]] = ..., wrist_limits: _Optional[_Union[_orbita3d_pb2.Limits3d, _Mapping]] = ...) -> None: ...

class ArmTemperatures(_message.Message):
    __slots__ = ("shoulder_temperature", "elbow_temperature", "wrist_temperature")
    SHOULDER_TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    ELBOW_TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    WRIST_TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    shoulder_temperature: _orbita2d_pb2.Float2d
    elbow_temperature: _orbita2d_pb2.Float2d
    wrist_temperature: _orbita3d_pb2.Float3d
    def __init__(self, shoulder_temperature: _Optional[_Union[_orbita2d_pb2.Float2d, _Mapping]] = ..., elbow_temperature: _Optional[_Union[_orbita2d_pb2.Float2d, _Mapping]] = ..., wrist_temperature: _Optional[_Union[_orbita3d_pb2.Float3d, _Mapping]] = ...) -> None: ...

class ArmComponentsCommands(_message.Message):
    __slots__ = ("shoulder_command", "elbow_command", "wrist_command")
    SHOULDER_COMMAND_FIELD_NUMBER: _ClassVar[int]
    ELBOW_COMMAND_FIELD_NUMBER: _ClassVar[int]
    WRIST_COMMAND_FIELD_NUMBER: _ClassVar[int]
    shoulder_command: _orbita2d_pb2.Orbita2dsCommand
    elbow_command: _orbita2d_pb2.Orbita2dsCommand
    wrist_command: _orbita3d_pb2.Orbita3dsCommand
    def __init__(self, shoulder_command: _Optional[_Union[_orbita2d_pb2.Orbita2dsCommand, _Mapping]] = ..., elbow_command: _Optional[_Union[_orbita2d_pb2.Orbita2dsCommand, _Mapping]] = ..., wrist_command: _Optional[_Union[_orbita3d_pb2.Orbita3dsCommand, _Mapping]] = ...) -> None: ...
