#!/usr/bin/env python3
"""A/B of benchmark rows between two benchmark build folders (e.g. build/bench of two checkouts): the
binaries run alternately, ROUNDS rounds (default 5), the order swapped every round; prints the median real
time per row and new/base. PAIRS="binary:filter,..." picks the rows (default: every bufferqueue row of
bench_memory and bench_end_to_end). Usage: benchmarks/ab_compare.py BASE_BUILD_DIR NEW_BUILD_DIR"""
import json, subprocess, sys, statistics, collections, os
rounds = int(os.environ.get("ROUNDS", "5"))
pairs = [tuple(p.split(":")) for p in os.environ.get("PAIRS", "bench_memory:bufferqueue,bench_end_to_end:bufferqueue").split(",")]
base_dir, new_dir = sys.argv[1], sys.argv[2]
times = {"base": collections.defaultdict(list), "new": collections.defaultdict(list)}
for r in range(rounds):
    for binary, filt in pairs:
        order = [("base", base_dir), ("new", new_dir)] if r % 2 == 0 else [("new", new_dir), ("base", base_dir)]
        for label, d in order:
            out = f"/tmp/ab_{label}_{binary}_{r}.json"
            subprocess.run([f"{d}/benchmarks/{binary}", f"--benchmark_filter={filt}", "--benchmark_min_time=0.2",
                            f"--benchmark_out={out}", "--benchmark_out_format=json"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, BUFFERQUEUE_BENCH_DIR="/tmp"))
            for b in json.load(open(out))["benchmarks"]:
                if b.get("run_type") == "iteration":
                    times[label][b["name"]].append(b["real_time"])
print(f"| row | base median | new median | new/base |  ({rounds} interleaved rounds, real time)")
print("|---|---|---|---|")
worst = 0
for name in times["base"]:
    b = statistics.median(times["base"][name]); n = statistics.median(times["new"][name])
    worst = max(worst, n / b)
    print(f"| {name} | {b:.1f} | {n:.1f} | {n/b:.3f} |")
print(f"worst ratio: {worst:.3f}")
