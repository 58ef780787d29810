"""Robots: SO-100/101, Koch and OMX followers on motor buses, any simulator as a robot."""
