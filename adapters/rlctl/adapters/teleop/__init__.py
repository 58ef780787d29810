"""Teleoperators: SO, Koch and OMX leader arms, scripted experts, replay of a recorded episode."""
