"""An emulated device closes its terminal only once its threads have ended: a thread late to
stop must not find its descriptors' numbers given to the next device's terminal."""

from __future__ import annotations

import os
import threading
import time

from rlctl.adapters.motors.virtual_pty import PtyDevice


class SlowToStop(PtyDevice):
    device_name = "slow device"

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.thread = threading.Thread(target=self.release.wait, daemon=True)

    def start(self) -> SlowToStop:
        self._open_pty()
        self.thread.start()
        return self

    def stop(self) -> None:
        self._close_pty_after([self.thread], timeout_s=0.1)


def same_file(fd: int, inode: int) -> bool:
    try:
        return os.fstat(fd).st_ino == inode
    except OSError:
        return False


def test_the_terminal_stays_open_until_a_late_thread_ends_then_closes():
    device = SlowToStop().start()
    master = device._master
    inode = os.fstat(master).st_ino
    device.stop()  # the thread is still running: nothing is closed under it
    assert same_file(master, inode)
    device.release.set()
    deadline = time.monotonic() + 10
    while same_file(master, inode) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not same_file(master, inode)


def test_a_device_whose_thread_ends_in_time_is_closed_at_once():
    device = SlowToStop().start()
    master = device._master
    inode = os.fstat(master).st_ino
    device.release.set()
    device.stop()
    assert not same_file(master, inode)


def test_a_second_stop_leaves_the_next_devices_terminal_open():
    first = SlowToStop().start()
    first.release.set()
    first.stop()
    second = SlowToStop().start()  # given the numbers the first one freed
    inode = os.fstat(second._master).st_ino
    first.stop()  # a with block's exit after an explicit stop, say
    assert same_file(second._master, inode)
    second.release.set()
    second.stop()
