"""A ZeroMQ image publisher as LeRobot 0.6.1's image server is: JSON with base64 JPEGs, one
message per frame. Run as a process by the tests:

    python zmq_publisher.py NAME WIDTH HEIGHT FPS FRAMES

It binds a free port, prints it, then publishes FRAMES frames (-1: until killed) of camera NAME
and exits. Frame k is a flat colour: red 200, green 10 k mod 250, blue 60 (RGB, as the server
encodes what OpenCV's RGB capture gives)."""

import base64
import json
import sys
import time

import cv2
import numpy as np
import zmq

name, width, height, fps, frames = sys.argv[1], *map(int, sys.argv[2:6])
context = zmq.Context()
socket = context.socket(zmq.PUB)
socket.setsockopt(zmq.LINGER, 0)
port = socket.bind_to_random_port("tcp://127.0.0.1")
print(port, flush=True)
k = 0
while frames < 0 or k < frames:
    image = np.empty((height, width, 3), np.uint8)
    image[...] = (200, (10 * k) % 250, 60)
    _, jpeg = cv2.imencode(".jpg", image, [int(cv2.IMWRITE_JPEG_QUALITY), 95])
    message = {"timestamps": {name: time.time()}, "images": {name: base64.b64encode(jpeg).decode()}}
    # LeRobot's server also sends messages with no new image: they must be skipped. Sent before
    # the frame, so that a subscriber keeping only the newest message (ZMQ's CONFLATE, as the
    # camera and LeRobot's do) still sees every frame it has time for.
    socket.send_string(json.dumps({"timestamps": {}, "images": {}}))
    socket.send_string(json.dumps(message))
    k += 1
    time.sleep(1 / fps)
socket.close()
context.term()
