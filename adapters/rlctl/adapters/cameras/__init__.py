"""Cameras: OpenCV devices and video files on a capture thread, and finding them."""
