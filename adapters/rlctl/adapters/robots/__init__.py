"""Robots: SO-100/101 and Koch followers on motor buses, any simulator as a robot."""
