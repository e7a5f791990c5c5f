#!/usr/bin/env python3
"""The walk of one item (issue 52): which library functions run, and in how many files, while one
int goes from `try_produce` through `co_await consume()` to `co_await commit()` on a warm memory
topic (walk_one_item.cpp). Run by `scripts/run walk`. Two counts:

  source     g++ -O0 -finstrument-functions, the standard and Boost headers excluded: every function
             of the library's source that runs, accessors and special members included - the walk a
             reader follows.
  optimized  clang++-14 -O2 -finstrument-functions-after-inlining: the calls left in the optimized
             program (what inlining does not remove).

A room is a file of the library, a header and its source (same base name) counting as one. Prints
calls, calls whose caller is in another room, and rooms with their calls; --list prints every call.
Builds into build/walk/<count>/ (the library's core sources, the walk and the hook).
"""
import argparse
import concurrent.futures
import glob
import os
import shutil
import subprocess
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
COUNTS = {
    "source": ("g++", ["-O0", "-finstrument-functions", "-finstrument-functions-exclude-file-list=/usr/"]),
    "optimized": ("clang++-14", ["-O2", "-finstrument-functions-after-inlining", "-DBOOST_ASIO_HAS_CO_AWAIT=1",
                                 "-DBOOST_ASIO_HAS_STD_COROUTINE=1"]),
}


def build(count, out):
    compiler, flags = COUNTS[count]
    launcher = ["ccache"] if shutil.which("ccache") else []
    common = ["-std=c++20", "-g", "-fno-pie", "-DFMT_HEADER_ONLY", "-I", os.path.join(ROOT, "include")]
    sources = sorted(path for path in glob.glob(os.path.join(ROOT, "src", "**", "*.cpp"), recursive=True)
                     if not os.path.relpath(path, os.path.join(ROOT, "src")).startswith(("mmap", "kafka")))
    sources.append(os.path.join(HERE, "walk_one_item.cpp"))
    os.makedirs(out, exist_ok=True)

    def compile_one(source):
        obj = os.path.join(out, os.path.relpath(source, ROOT).replace(os.sep, "_") + ".o")
        subprocess.run(launcher + [compiler] + common + flags + ["-c", source, "-o", obj], check=True)
        return obj

    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        objects = list(pool.map(compile_one, sources))
    hook = os.path.join(out, "walk_hook.o")
    subprocess.run([compiler, "-std=c++20", "-O0", "-fno-pie", "-c", os.path.join(HERE, "walk_hook.cpp"), "-o", hook],
                   check=True)
    program = os.path.join(out, "walk_one_item")
    subprocess.run([compiler, "-no-pie", "-o", program] + objects + [hook, "-pthread"], check=True)
    return program


def room_of(path):
    """The room of a function defined in `path`, or None outside the library."""
    normalized = os.path.normpath(path)
    library = os.path.join(ROOT, "include", "bufferqueue") + os.sep, os.path.join(ROOT, "src") + os.sep
    if not normalized.startswith(library):
        return None
    return os.path.splitext(os.path.basename(normalized))[0]


def walk(program, records_path):
    subprocess.run([program, records_path], check=True)
    records = [(int(depth), address) for depth, address in (line.split() for line in open(records_path))]
    addresses = sorted({address for _, address in records})
    lines = subprocess.run(["addr2line", "-f", "-C", "-e", program] + addresses, check=True, capture_output=True,
                           text=True).stdout.splitlines()
    names = {address: (lines[2 * index], room_of(lines[2 * index + 1].split(":")[0]))
             for index, address in enumerate(addresses)}
    calls = []
    stack = {}  # depth -> room of the nearest library function entered at that depth
    for depth, address in records:
        name, room = names[address]
        stack[depth] = room
        if room is None:
            continue
        caller = next((stack[level] for level in range(depth - 1, -1, -1) if stack.get(level)), None)
        calls.append((caller, room, name))
    return calls


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", choices=sorted(COUNTS), action="append")
    parser.add_argument("--list", action="store_true", help="print every call")
    arguments = parser.parse_args()
    for count in arguments.count or ["source", "optimized"]:
        out = os.path.join(ROOT, "build", "walk", count)
        calls = walk(build(count, out), os.path.join(out, "records.txt"))
        rooms = Counter(room for _, room, _ in calls)
        between = sum(1 for caller, room, _ in calls if caller != room)
        print(f"\n{count}: {len(calls)} calls ({between} from another room) over {len(rooms)} rooms")
        print("  " + ", ".join(f"{room} {number}" for room, number in rooms.most_common()))
        if arguments.list:
            for caller, room, name in calls:
                print(f"  {caller or '(user)':>20} -> {room:<20} {name[:140]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
