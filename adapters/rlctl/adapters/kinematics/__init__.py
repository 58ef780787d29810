"""Forward and inverse kinematics from a URDF (numpy, LeRobot's `RobotKinematics` calls), and
LeRobot 0.6.1's end-effector processor steps that turn an end-effector target into joint goals."""
