"""Run with LeRobot 0.6.1's Python: its Damiao bus's own packing of the frames in the job (JSON on
argv[1]), printed as JSON. python-can is not needed: the packing methods use no bus."""

import json
import sys

from lerobot.motors.damiao.damiao import DamiaoMotorsBus
from lerobot.motors.damiao.tables import MotorType

job = json.loads(sys.argv[1])
bus = object.__new__(DamiaoMotorsBus)  # only the packing methods are called
out = {"mit": [], "feedback": []}
for model, kp, kd, pos, vel, tau in job["mit"]:
    kind = getattr(MotorType, model.upper())
    out["mit"].append(bus._encode_mit_packet(kind, kp, kd, pos, vel, tau))
for model, data in job["feedback"]:
    kind = getattr(MotorType, model.upper())
    pos, vel, tau, t_mos, t_rotor = bus._decode_motor_state(bytes.fromhex(data), kind)
    out["feedback"].append([float(pos), float(vel), float(tau), int(t_mos), int(t_rotor)])
print(json.dumps(out))
