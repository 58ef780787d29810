"""Teleoperators: SO and Koch leader arms, scripted experts, replay of a recorded episode."""
