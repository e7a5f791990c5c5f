#!/usr/bin/env python3
"""Compile time of a user's file (issue 29, part 1), run by `scripts/run compile-time`.

Compiles, with g++ -std=c++20 -O2 as a user's build would, three files in interleaved rounds and
keeps each one's best CPU time (user + system of the compiler processes):
  asio_minimal.cpp  Boost.Asio alone: an io_context and a post (the reference)
  core_minimal.cpp  <bufferqueue/core.hpp>, one memory topic registered, one item produced
  quickstart.cpp    examples/quickstart.cpp (<bufferqueue/core.hpp>: two memory topics, pull consumers)
Prints the times, the ratio core / Asio and the targets (ratio <= 2, quickstart <= 8 s). Exits
non-zero only when a compile fails: the targets are reported, not enforced.
"""
import argparse
import os
import resource
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FILES = [
    ("asio_minimal", os.path.join(HERE, "asio_minimal.cpp")),
    ("core_minimal", os.path.join(HERE, "core_minimal.cpp")),
    ("quickstart", os.path.join(ROOT, "examples", "quickstart.cpp")),
]
RATIO_TARGET = 2.0
QUICKSTART_TARGET = 8.0


def compile_seconds(compiler, path):
    """CPU seconds of one compile of `path` (the object is thrown away)."""
    command = [compiler, "-std=c++20", "-O2", "-DBOOST_ALL_NO_LIB", "-DMSGPACK_DEFAULT_API_VERSION=3",
               "-I", os.path.join(ROOT, "include"), "-c", path, "-o", os.devnull]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        sys.stderr.write(result.stdout)
        raise SystemExit(f"compile-time: {' '.join(command)} failed ({result.returncode})")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the best of each file is kept")
    parser.add_argument("--compiler", default="g++")
    arguments = parser.parse_args()
    best = {name: float("inf") for name, _ in FILES}
    for round_number in range(arguments.rounds):
        for name, path in FILES:
            seconds = compile_seconds(arguments.compiler, path)
            best[name] = min(best[name], seconds)
            print(f"round {round_number + 1}: {name:<13} {seconds:6.2f} s CPU", flush=True)
    ratio = best["core_minimal"] / best["asio_minimal"]
    print()
    print(f"| file | best of {arguments.rounds}, s CPU ({arguments.compiler} -O2) |")
    print("| --- | --- |")
    for name, _ in FILES:
        print(f"| {name} | {best[name]:.2f} |")
    print()
    print(f"core_minimal / asio_minimal = {ratio:.2f} (target <= {RATIO_TARGET:g}: "
          f"{'met' if ratio <= RATIO_TARGET else 'NOT met'})")
    print(f"quickstart = {best['quickstart']:.2f} s (target <= {QUICKSTART_TARGET:g} s: "
          f"{'met' if best['quickstart'] <= QUICKSTART_TARGET else 'NOT met'})")


if __name__ == "__main__":
    main()
