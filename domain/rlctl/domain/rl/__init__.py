"""Reinforcement learning on the robot (HIL-SERL): transitions, replay, SAC's settings."""
