"""Run with LeRobot 0.6.1's Python: the frames its Robstride bus sends for the commands in the job
(JSON on argv[1]), captured from a bus whose python-can Bus is a recorder, and its decoding of
feedback frames, printed as JSON. python-can is not needed: where it is missing, its `Message`
is stood in for by a record of the same fields (python-can's defaults)."""

import json
import sys
from types import SimpleNamespace

import lerobot.motors.robstride.robstride as robstride_module
from lerobot.motors.motors_bus import Motor, MotorNormMode
from lerobot.motors.robstride.robstride import RobstrideMotorsBus
from lerobot.motors.robstride.tables import ControlMode


class Message:
    def __init__(self, arbitration_id=0, data=(), is_extended_id=True, is_fd=False, **_):
        self.arbitration_id = arbitration_id
        self.data = bytearray(data)
        self.is_extended_id = is_extended_id
        self.is_fd = is_fd


try:
    import can  # noqa: F401
except ImportError:
    robstride_module.can = SimpleNamespace(Message=Message, CanError=OSError)


class Recorder:
    def __init__(self):
        self.sent = []

    def send(self, msg, timeout=None):
        self.sent.append([msg.arbitration_id, list(msg.data), msg.is_fd, msg.is_extended_id])

    def recv(self, timeout=None):
        return None

    def shutdown(self):
        pass


job = json.loads(sys.argv[1])
motors = {
    name: Motor(motor_id, "robstride", MotorNormMode.DEGREES, motor_type_str=model, recv_id=recv)
    for name, (motor_id, model, recv) in job["motors"].items()
}
robstride_module.require_package = lambda *a, **k: None
bus = RobstrideMotorsBus("rig", motors)
bus.canbus = Recorder()
bus._is_connected = True
out = {}
for step, (kind, *args) in enumerate(job["steps"]):
    bus.canbus.sent = []
    if kind == "gains":
        bus.sync_write(args[0], args[1])
        continue
    if kind == "goal":
        bus.sync_write("Goal_Position", args[0])
    elif kind == "enable":
        bus.enable_torque(args[0])
    elif kind == "disable":
        bus.disable_torque(args[0])
    elif kind == "zero":
        bus.set_zero_position(args[0])
    elif kind == "query":
        for name in args[0]:
            bus._query_status_via_clear_fault(name, timeout=0.0)
    elif kind == "mode":
        for name in args[1]:
            bus._switch_operation_mode(name, ControlMode(args[0]))
            # LeRobot records the mode when the motor answers; the recorder never does.
            bus.operation_mode[name] = ControlMode(args[0])
    elif kind == "velocity":
        for name, value in args[0].items():
            bus.write("Goal_Velocity", name, value)
    out[str(step)] = bus.canbus.sent
feedback = []
for data in job["feedback"]:
    pos, vel, tau, temp = bus._decode_motor_state(bytes.fromhex(data))
    feedback.append([float(pos), float(vel), float(tau), float(temp)])
out["feedback"] = feedback
print(json.dumps(out))
