"""The Dynamixel 2.0 codec against the e-Manual's vectors and dynamixel-sdk's own bytes."""

from __future__ import annotations

import dynamixel_sdk as sdk
from hypothesis import assume, given
from hypothesis import strategies as st

from rlctl.adapters.motors import dynamixel_protocol as dx

ids = st.integers(0, dx.MAX_ID)
addresses = st.integers(0, 700)
# Bytes rich in FF and FD, so that headers inside payloads (and their stuffing) come up often.
header_prone = st.lists(st.sampled_from([0xFF, 0xFD, 0x00, 0x55]), max_size=16).map(bytes)
payloads = st.one_of(st.binary(max_size=16), header_prone)

sdk_packets = sdk.PacketHandler(2.0)


def needs_no_stuffing(params: bytes) -> bool:
    # dynamixel-sdk 4.1 drops the stuffed copy when stuffing lengthens a packet it sends
    # (`txPacket` ignores `addStuffing`'s result), so it only agrees with the protocol, and with
    # us, on payloads that need none. Its reading side does remove stuffing.
    return dx.stuff(params) == params


def test_e_manual_vectors():
    # https://emanual.robotis.com/docs/en/dxl/protocol2/ : ping id 1, read 4 bytes at 132 of id 1
    assert dx.instruction(1, dx.Instruction.PING) == bytes.fromhex("fffffd0001030001194e")
    read = dx.instruction(1, dx.Instruction.READ, dx.read_params(132, 4))
    assert read == bytes.fromhex("fffffd0001070002840004001d15")


@given(st.binary(max_size=64))
def test_crc_matches_the_sdk(data):
    assert dx.crc16(data) == sdk_packets.updateCRC(0, list(data), len(data))


@given(payloads)
def test_stuffing_round_trips_and_hides_headers(payload):
    stuffed = dx.stuff(payload)
    assert dx.unstuff(stuffed) == payload
    # What remains of FF FF FD is always followed by the stuffed FD.
    index = stuffed.find(b"\xff\xff\xfd")
    while index >= 0:
        assert stuffed[index + 3 : index + 4] == b"\xfd"
        index = stuffed.find(b"\xff\xff\xfd", index + 1)


@given(ids, st.integers(0, 255), payloads)
def test_packet_round_trips_through_the_reader(motor_id, op, params):
    packet = dx.Packet(motor_id, op, params)
    assert dx.PacketReader().feed(packet.encode()) == [packet]


@given(st.lists(st.tuples(ids, st.integers(0, 0x7F), payloads), max_size=4), st.data())
def test_reader_finds_status_packets_fed_in_pieces(specs, data):
    packets = [dx.Packet(i, dx.Instruction.STATUS, bytes([e]) + p) for i, e, p in specs]
    stream = b"\x00\x13" + b"".join(p.encode() for p in packets)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=4)))
    reader = dx.PacketReader()
    found = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)]):
        found += reader.feed(stream[start:end])
    assert found == packets


def test_reader_drops_a_packet_with_a_bad_crc():
    bad = bytearray(dx.status(1, 0, b"\x01"))
    bad[-1] ^= 0x5A
    reader = dx.PacketReader()
    assert reader.feed(bytes(bad) + dx.status(2, 0, b"\x02")) == [
        dx.Packet(2, dx.Instruction.STATUS, b"\x00\x02")
    ]
    assert reader.bad_crcs == 1


@given(ids, addresses, payloads.filter(bool))
def test_write_matches_the_sdk(recording_port, motor_id, address, data):
    assume(needs_no_stuffing(dx.write_params(address, data)))
    port = recording_port()
    sdk_packets.writeTxOnly(port, motor_id, address, len(data), list(data))
    expected = dx.instruction(motor_id, dx.Instruction.WRITE, dx.write_params(address, data))
    assert bytes(port.written) == expected


@given(addresses, st.sampled_from([1, 2, 4]), st.lists(ids, min_size=1, max_size=6, unique=True))
def test_sync_read_matches_the_sdk(recording_port, address, length, motor_ids):
    port = recording_port()
    reader = sdk.GroupSyncRead(port, sdk_packets, address, length)
    for motor_id in motor_ids:
        reader.addParam(motor_id)
    reader.txPacket()
    params = dx.sync_read_params(address, length, motor_ids)
    assert bytes(port.written) == dx.instruction(dx.BROADCAST_ID, dx.Instruction.SYNC_READ, params)


@given(addresses, st.dictionaries(ids, payloads.map(lambda p: (p + b"\0" * 4)[:4]), min_size=1))
def test_sync_write_matches_the_sdk(recording_port, address, data_by_id):
    assume(needs_no_stuffing(dx.sync_write_params(address, 4, data_by_id)))
    port = recording_port()
    writer = sdk.GroupSyncWrite(port, sdk_packets, address, 4)
    for motor_id, data in data_by_id.items():
        writer.addParam(motor_id, list(data))
    writer.txPacket()
    params = dx.sync_write_params(address, 4, data_by_id)
    assert bytes(port.written) == dx.instruction(dx.BROADCAST_ID, dx.Instruction.SYNC_WRITE, params)
    assert dx.parse_sync_write(params) == (address, 4, data_by_id)


@given(ids, st.sampled_from([0, dx.ALERT, dx.ErrorNumber.ACCESS]), payloads)
def test_sdk_reads_our_status_packets(recording_port, motor_id, error, data):
    # The SDK unstuffs in place and then looks back at bytes it already shifted, so after one
    # removal a later FD FD can be taken for stuffing (it reads FF FF FD FF FD FD as
    # FF FF FD FF FD + garbage). With at most one FD FD it decodes exactly.
    assume(dx.stuff(bytes([dx.Instruction.STATUS, error]) + data).count(b"\xfd\xfd") <= 1)
    port = recording_port(dx.status(motor_id, error, data))
    received, result, received_error = sdk_packets.readRx(port, motor_id, len(data))
    assert (bytes(received), result, received_error) == (data, sdk.COMM_SUCCESS, error)
