"""The Feetech codec against hand-computed vectors and against feetech-servo-sdk's own bytes."""

from __future__ import annotations

import scservo_sdk as scs
from hypothesis import given
from hypothesis import strategies as st

from rlctl.adapters.motors import feetech_protocol as ft

ids = st.integers(0, ft.MAX_ID)
addresses = st.integers(0, 255)
payloads = st.binary(min_size=1, max_size=8)


def test_known_packets():
    assert ft.instruction(1, ft.Instruction.PING) == bytes.fromhex("ffff010201fb")
    # READ id 1, Present_Position (56 = 0x38), 2 bytes: checksum ~(1+4+2+0x38+2) = 0xBE
    read = ft.instruction(1, ft.Instruction.READ, ft.read_params(56, 2))
    assert read == bytes.fromhex("ffff0104023802be")
    assert ft.checksum(bytes([1, 4, 2, 0x38, 2])) == 0xBE


@given(ids, st.integers(0, 255), st.binary(max_size=20))
def test_packet_round_trips_through_the_reader(motor_id, code, params):
    packet = ft.Packet(motor_id, code, params)
    assert ft.PacketReader().feed(packet.encode()) == [packet]


@given(
    st.lists(st.tuples(ids, st.integers(0, 0x7F), st.binary(max_size=6)), max_size=5),
    st.binary(max_size=6),
    st.data(),
)
def test_reader_finds_packets_in_noise_fed_in_pieces(specs, noise, data):
    packets = [ft.Packet(*spec) for spec in specs]
    stream = noise.replace(b"\xff", b"") + b"".join(p.encode() for p in packets)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=4)))
    reader = ft.PacketReader()
    found = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)]):
        found += reader.feed(stream[start:end])
    assert found == packets


def test_reader_drops_a_packet_with_a_bad_checksum():
    good = ft.status(2, 0, b"\x01\x02")
    bad = bytearray(ft.status(1, 0, b"\x03\x04"))
    bad[-1] ^= 0xFF
    reader = ft.PacketReader()
    assert reader.feed(bytes(bad) + good) == [ft.Packet(2, 0, b"\x01\x02")]
    assert reader.bad_checksums == 1


@given(ids, addresses, st.sampled_from([1, 2, 4]))
def test_read_matches_the_sdk(recording_port, motor_id, address, length):
    port = recording_port()
    scs.PacketHandler(0).readTx(port, motor_id, address, length)
    assert bytes(port.written) == ft.instruction(
        motor_id, ft.Instruction.READ, ft.read_params(address, length)
    )


@given(ids, addresses, payloads)
def test_write_matches_the_sdk(recording_port, motor_id, address, data):
    port = recording_port()
    scs.PacketHandler(0).writeTxOnly(port, motor_id, address, len(data), list(data))
    assert bytes(port.written) == ft.instruction(
        motor_id, ft.Instruction.WRITE, ft.write_params(address, data)
    )


@given(addresses, st.sampled_from([1, 2, 4]), st.lists(ids, min_size=1, max_size=6, unique=True))
def test_sync_read_matches_the_sdk(recording_port, address, length, motor_ids):
    port = recording_port()
    reader = scs.GroupSyncRead(port, scs.PacketHandler(0), address, length)
    for motor_id in motor_ids:
        reader.addParam(motor_id)
    reader.txPacket()
    expected = ft.sync_read_params(address, length, motor_ids)
    assert bytes(port.written) == ft.instruction(
        ft.BROADCAST_ID, ft.Instruction.SYNC_READ, expected
    )


@given(addresses, st.dictionaries(ids, st.binary(min_size=2, max_size=2), min_size=1, max_size=6))
def test_sync_write_matches_the_sdk(recording_port, address, data_by_id):
    port = recording_port()
    writer = scs.GroupSyncWrite(port, scs.PacketHandler(0), address, 2)
    for motor_id, data in data_by_id.items():
        writer.addParam(motor_id, list(data))
    writer.txPacket()
    params = ft.sync_write_params(address, 2, data_by_id)
    assert bytes(port.written) == ft.instruction(ft.BROADCAST_ID, ft.Instruction.SYNC_WRITE, params)
    assert ft.parse_sync_write(params) == (address, 2, data_by_id)


@given(st.integers(0, 0xFD), st.sampled_from([0, 0x20, 0x05]), st.binary(min_size=2, max_size=2))
def test_sdk_reads_our_status_packets(recording_port, motor_id, error, data):
    port = recording_port(ft.status(motor_id, error, data))
    received, result, received_error = scs.PacketHandler(0).readRx(port, motor_id, 2)
    assert (bytes(received), result, received_error) == (data, scs.COMM_SUCCESS, error)
