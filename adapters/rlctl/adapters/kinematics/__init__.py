"""Forward and inverse kinematics from a URDF (placo), and LeRobot 0.6.1's end-effector processor
steps that turn an end-effector target into joint goals."""
