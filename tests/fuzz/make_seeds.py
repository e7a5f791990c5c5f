#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/ (run from anywhere).

The seeds are small valid and almost-valid inputs in the formats of docs/mmap-format.md, so the
fuzzers start from inputs that pass the CRC checks instead of having to find them.
"""
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent / "corpus"

def crc32c(data: bytes, crc: int = 0) -> int:
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF

MAGIC = b"BQSEGMT\0"

def header(index: int, size: int) -> bytes:
    body = MAGIC + struct.pack("<IIQQI", 1, 40, index, size, 0)
    return body + struct.pack("<I", crc32c(body))

def record(payload: bytes) -> bytes:
    length = struct.pack("<I", len(payload))
    padding = b"\0" * ((8 - len(payload) % 8) % 8)
    return length + struct.pack("<I", crc32c(length + payload)) + payload + padding

END_MARKER = struct.pack("<I", 0xFFFFFFFF) + struct.pack("<I", crc32c(b"\xff\xff\xff\xff" + MAGIC))

# shared_header: a shared header file (host byte order, x86-64 glibc's pthread_mutex_t).
ROBUST_SHARED_MUTEX_KIND = 144  # PTHREAD_MUTEX_ROBUST_NORMAL_NP | the process-shared bit

def shared_header(partitions: int, segment_size: int, slots: list, state: int = 1,
                  serializer: bytes = b"bufferqueue::raw_serializer<int>", version: int = 2) -> bytes:
    head = b"BQSHARE\0" + struct.pack("<IIIIQQQIIII", version, state, 256, 256, partitions, segment_size, 0, 0, 0, 0,
                                       len(serializer))
    head += serializer + b"\0" * (192 - len(serializer))
    assert len(head) == 256
    return head + b"".join(slots)

def shared_slot(lock_word: int = 0, tail_segment: int = 0, tail_position: int = 40, items: int = 0,
                retained: int = 40) -> bytes:
    mutex = struct.pack("<iIiIi", lock_word, 0, 0, 0, ROBUST_SHARED_MUTEX_KIND) + b"\0" * 44
    end = tail_segment * 4096 + tail_position
    state = struct.pack("<10Q", tail_segment, tail_position, 0, items, 0, tail_position, end, items, end, items)
    group_commit = struct.pack("<8Q", 0, 0, 0, end, retained, 0, 0, 0)
    return mutex + state + group_commit + b"\0" * 48

def write(target: str, name: str, data: bytes) -> None:
    folder = HERE / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)

def main() -> None:
    assert crc32c(b"\0\0\0\0") == 0x48674BC7 and struct.unpack("<I", END_MARKER[4:])[0] == 0x148C3D26

    # segment_scanner: whole segments.
    records = record(b"first") + record(b"") + record(b"a longer payload of 27 bytes")
    seg = header(0, 256) + records
    write("segment_scanner", "records", seg + b"\0" * (256 - len(seg)))
    full = header(0, 128) + record(b"x" * 24) + record(b"y" * 40)
    write("segment_scanner", "ended", full + END_MARKER + b"\0" * (128 - len(full) - 8))
    torn = bytearray(seg + b"\0" * (256 - len(seg)))
    torn[60] ^= 0x01
    write("segment_scanner", "damaged", bytes(torn))
    write("segment_scanner", "empty", header(0, 64) + b"\0" * 24)

    # recovery: flags, producer.offset (u16), consumer.offset (u16), segment bodies (216 bytes each).
    body0 = record(b"one") + record(b"two") + record(b"three")
    write("recovery", "prefix", bytes([0, 0, 0, 0, 0]) + body0)
    producer = 40 + len(body0)
    write("recovery", "vouched", bytes([1]) + struct.pack("<HH", producer, 40) + body0)
    write("recovery", "group", bytes([3]) + struct.pack("<HH", producer, 40 + len(record(b"one"))) + body0)
    filled = b""
    while len(filled) + len(record(b"z" * 20)) <= 216 - 8:
        filled += record(b"z" * 20)
    filled += END_MARKER
    body_first = filled + b"\0" * (216 - len(filled))
    write("recovery", "two-segments", bytes([0, 0, 0, 0, 0]) + body_first + record(b"next segment"))
    write("recovery", "raw-headers", bytes([4, 0, 0, 0, 0]) + header(0, 256) + body0)

    # topic_options_reader: topic.options files (magic, version, name length, partitions, segment
    # size, serializer name, CRC-32C).
    def topic_options(partitions: int, segment_size: int, name: bytes) -> bytes:
        body = b"BQTOPIC\0" + struct.pack("<IIQQ", 1, len(name), partitions, segment_size) + name
        return body + struct.pack("<I", crc32c(body))
    name = b"bufferqueue::json_serializer<std::string>"
    valid = topic_options(4, 1 << 20, name)
    write("topic_options_reader", "valid", valid)
    write("topic_options_reader", "empty_name", topic_options(1, 64, b""))
    write("topic_options_reader", "bad_crc", valid[:-1] + bytes([valid[-1] ^ 1]))
    write("topic_options_reader", "no_partitions", topic_options(0, 4096, name))
    write("topic_options_reader", "bad_segment_size", topic_options(2, 100, name))
    write("topic_options_reader", "short", valid[:20])

    # checkpoint_reader: checkpoint files and group folder names.
    write("checkpoint_reader", "offset", struct.pack("<Q", 40))  # format version 1
    checkpoint = struct.pack("<QI", 40, 2)
    write("checkpoint_reader", "offset_v2", checkpoint + struct.pack("<I", crc32c(checkpoint)))
    write("checkpoint_reader", "offset_v2_bad_crc", checkpoint + struct.pack("<I", crc32c(checkpoint) ^ 1))
    write("checkpoint_reader", "negative", struct.pack("<Q", 1 << 63))
    write("checkpoint_reader", "short", b"\x28\0\0")
    write("checkpoint_reader", "escaped", b"orders%2Fworker 1")
    write("checkpoint_reader", "dots", b"%2E%2E")

    # shared_header: whole shared.header files.
    write("shared_header", "one-partition", shared_header(1, 4096, [shared_slot(tail_position=64, items=2)]))
    write("shared_header", "three-partitions",
          shared_header(3, 4096, [shared_slot(), shared_slot(tail_segment=2, tail_position=128, items=9),
                                  shared_slot(tail_position=4088, items=100)]))
    # The holder died holding partition 0's append lock (FUTEX_OWNER_DIED), having written a record.
    dead = bytearray(shared_slot(lock_word=0x40000000, tail_position=64, items=2))
    dead[64 + 40:64 + 48] = struct.pack("<Q", 96)  # the pending end
    write("shared_header", "dead-holder", shared_header(1, 4096, [bytes(dead)]))
    write("shared_header", "not-finished", shared_header(1, 4096, [shared_slot()], state=0))
    # Made by a process of an older bufferqueue (format version 1): refused with invalid_argument.
    write("shared_header", "version-1", shared_header(1, 4096, [shared_slot()], version=1))

    # Deserializers.
    write("json_deserializer", "order", b'{"id":7,"name":"widget","prices":[1.5,2.25]}')
    write("json_deserializer", "nested", b'{"id":-1,"name":"\\u00e9","prices":[]}')
    write("json_deserializer", "wrong", b'{"id":"seven"}')
    # msgpack fixarray of 4: id, name, quantities, attributes
    write("msgpack_deserializer", "order", bytes([0x94, 0x07, 0xA6]) + b"widget" +
          bytes([0x92, 0x01, 0x02, 0x81, 0xA1]) + b"k" + bytes([0xA1]) + b"v")
    write("msgpack_deserializer", "big-array", bytes([0x94, 0x00, 0xA0, 0xDD, 0xFF, 0xFF, 0xFF, 0xFF, 0x80]))
    write("msgpack_deserializer", "map", bytes([0x81, 0xA1]) + b"a" + bytes([0x01]))
    write("raw_deserializer", "sample", struct.pack("<QdI4s", 42, 3.5, 1, b"tag!"))
    write("raw_deserializer", "short", b"\x01\x02\x03")

if __name__ == "__main__":
    main()
