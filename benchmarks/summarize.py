#!/usr/bin/python3
"""Merges Google Benchmark JSON outputs, computes medians, the ours/peer ratios and the status of the
issue's targets, and writes results JSON, a Markdown summary and (optionally) a chart.

usage: summarize.py [--results OUT.json] [--markdown OUT.md] [--chart OUT.png] [--check] IN.json...

--check fails (exit 1) when any benchmark reported an error; `scripts/run test` uses it on the smoke run.
Uses only the standard library, except matplotlib for --chart.
"""

import argparse
import json
import statistics
import sys

UNIT_TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def load(paths):
    context, rows = None, []
    for path in paths:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
        context = context or data.get("context", {})
        rows.extend(data.get("benchmarks", []))
    return context, rows


def base_name(row):
    """The benchmark's name without Google Benchmark's suffixes (/manual_time, /iterations:N ...)."""
    name = row.get("run_name", row["name"])
    parts = [p for p in name.split("/") if not p.startswith(("manual_time", "real_time", "iterations:", "repeats:",
                                                             "min_time:"))]
    return "/".join(parts)


def medians(rows):
    """name -> {time_us, counters..., repetitions, error}: the median of the repetitions."""
    grouped = {}
    for row in rows:
        if row.get("run_type") == "aggregate":
            continue
        grouped.setdefault(base_name(row), []).append(row)
    result = {}
    for name, runs in grouped.items():
        errors = [r.get("error_message", "error") for r in runs if r.get("error_occurred")]
        good = [r for r in runs if not r.get("error_occurred")]
        entry = {"repetitions": len(good), "error": errors[0] if errors else None}
        if good:
            entry["time_us"] = statistics.median(r["real_time"] * UNIT_TO_US[r.get("time_unit", "ns")] for r in good)
            skip = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads", "iterations",
                    "real_time", "cpu_time", "time_unit", "family_index", "per_family_instance_index",
                    "aggregate_name", "aggregate_unit", "error_occurred", "error_message"}
            for key in good[0]:
                if key not in skip and isinstance(good[0][key], (int, float)):
                    entry[key] = statistics.median(r[key] for r in good if key in r)
        result[name] = entry
    return result


def find(results, prefix, suffix=""):
    for name, entry in results.items():
        if name.startswith(prefix) and name.endswith(suffix) and "time_us" in entry:
            return name, entry
    return None, None


def time_of(results, name):
    entry = results.get(name)
    return entry["time_us"] if entry and "time_us" in entry else None


def thread_counts(results, kind):
    """The N of every /p:N (kind "produce") or /c:N (kind "consume") row, ascending."""
    return sorted({int(n.rsplit(":", 1)[1]) for n in results if n.startswith(kind + "/")})


def comparisons(results):
    """(group title, ours name, [peer names]) for the tables and the ratios."""
    groups = []
    consumer_counts = thread_counts(results, "consume")
    c = consumer_counts[0] if consumer_counts else None
    for count in thread_counts(results, "produce"):
        s = f"/p:{count}"
        for mode in ("unbounded", "bounded"):
            groups.append((f"Produce, single items, {count} producer threads, {mode}",
                           f"produce/single/bufferqueue_{mode}{s}",
                           [f"produce/single/{peer}{s}" for peer in
                            ("moodycamel_enqueue", "moodycamel_token_enqueue", "moodycamel_best_token_enqueue",
                             "mutex_deque_item", "tbb_push", "asio_channel_try_send")]))
            groups.append((f"Produce, each thread's chunk as one batch, {count} producer threads, {mode}",
                           f"produce/batch/bufferqueue_{mode}{s}",
                           [f"produce/batch/{peer}{s}" for peer in
                            ("moodycamel_enqueue_bulk", "moodycamel_best_enqueue_bulk", "mutex_deque_chunk")]
                           + ["limit/memcpy_32KiB"]))
    if c:
        for batch in (1, 10, 100, 1000):
            peers = (("moodycamel_try_dequeue", "mutex_deque_item", "tbb_try_pop", "asio_channel_try_receive")
                     if batch == 1 else ("moodycamel_try_dequeue_bulk", "mutex_deque_chunk"))
            groups.append((f"Consume, batch {batch}, {c} consumers over {c} partitions, auto commit",
                           f"consume/bufferqueue/batch:{batch}/c:{c}",
                           [f"consume/{peer}/batch:{batch}/c:{c}" for peer in peers]))
    for name in sorted(n for n in results if n.startswith("user/awaited_consume/bufferqueue/")):
        shape = name.split("/", 3)[3]
        groups.append((f"co_await consume(), consumers parked when the round starts, {shape}", name,
                       [f"user/awaited_consume/moodycamel_blocking_best/{shape}", "user/limit/memcpy_32KiB"]))
    for name in sorted(n for n in results if n.startswith("user/fresh_batch_produce/bufferqueue/")):
        shape = name.rsplit("/", 1)[1]
        groups.append((f"Batch produce into a topic just created, {shape}", name,
                       [f"user/fresh_batch_produce/moodycamel_best_enqueue_bulk/{shape}", "user/limit/memcpy_32KiB"]))
    # Issue 28, target 4: real items moved in (benchmarks/items.cpp).
    for name in sorted(n for n in results if n.startswith("items/produce/") and "/bufferqueue/" in n):
        _, _, item, kind, _, threads = name.split("/")
        title = {"struct64": "a 64-byte struct", "string100": "a ~100-byte std::string"}.get(item, item)
        how = "single items" if kind == "single" else "each thread's chunk as one batch"
        groups.append((f"Produce real items moved in, {title}, {how}, {threads.split(':')[1]} producer threads",
                       name, [f"items/produce/{item}/{kind}/{peer}/{threads}" for peer in
                              ("moodycamel_best", "mutex_deque")]))
    groups.append(("Awaited single-item produce into a bounded topic kept full (capacity 256), 4 producer coroutines "
                   "on 2 threads, beside the same at capacity 4,096",
                   "user/bounded_wait/bufferqueue/capacity:256/p:4", ["user/bounded_wait/bufferqueue/capacity:4096/p:4"]))
    groups.append(("The seed's shape: 12 single-item producers, 12 awaiting consumers, 12 partitions",
                   "user/seed_shape/bufferqueue/p:12/c:12", ["user/seed_shape/moodycamel_blocking_best/p:12/c:12"]))
    groups.append(("Wake-up: produce -> suspended consumer resumes (mean of iterations; p50/p99 in counters)",
                   "wakeup/bufferqueue", ["wakeup/asio_post"]))
    groups.append(("mmap produce, 64-byte records, raw serializer, per record", "mmap/produce/batch_1000",
                   ["mmap/produce/batch_100", "mmap/produce/immediate", "mmap/floor/memcpy_64B_into_mapping",
                    "mmap/floor/msync_one_page"]))
    groups.append(("Serializer round trip (encode + decode) of a 64-byte record", "serializer/raw",
                   ["serializer/msgpack", "serializer/json"]))
    # Issue 13: Kafka topics beside a bare librdkafka loop on the same mock cluster (bench_kafka).
    for kind, title in (("produce", "Kafka produce: 8,192 ints acknowledged by the mock broker, one partition"),
                        ("consume", "Kafka consume: 8,192 ints in one consumer group, batches of 1,000 committed "
                                    "one by one")):
        groups.append((f"{title}, raw serializer", f"kafka/{kind}/bufferqueue_raw", [f"kafka/{kind}/librdkafka"]))
        groups.append((f"{title}, json serializer (the default)", f"kafka/{kind}/bufferqueue",
                       [f"kafka/{kind}/librdkafka"]))
    return [(title, ours, [peer for peer in peers if peer in results]) for title, ours, peers in groups
            if ours in results]


def target(status, number, text, measured, met):
    status.append({"target": number, "text": text, "measured": measured, "met": met})


def targets(results):
    status = []
    p = min(thread_counts(results, "produce"), default=None)
    c = min(thread_counts(results, "consume"), default=None)

    def speedup(ours, peer):
        ours_time, peer_time = time_of(results, ours), time_of(results, peer)
        return peer_time / ours_time if ours_time and peer_time else None

    def fmt(value, suffix="x"):
        return "n/a" if value is None else f"{value:.2f}{suffix}"

    def at_least(value, bound):
        return value is not None and value >= bound

    if p:
        s = f"/p:{p}"
        parts, met = [], True
        for mode in ("unbounded", "bounded"):
            ours = f"produce/batch/bufferqueue_{mode}{s}"
            bulk = speedup(ours, f"produce/batch/moodycamel_enqueue_bulk{s}")
            chunk = speedup(ours, f"produce/batch/mutex_deque_chunk{s}")
            parts.append(f"{mode}: speed-up {fmt(bulk)} over enqueue_bulk, {fmt(chunk)} over deque per chunk")
            met = met and at_least(bulk, 3) and at_least(chunk, 1)
        target(status, 1, f"batch produce ({p} producers) >= 3x moodycamel enqueue_bulk, >= deque per chunk",
               "; ".join(parts), met)

        # The target is the default (unbounded) topic; the bounded row is reported beside it: an exact
        # topic-wide bound makes every admission update one shared count, which no lane removes.
        parts, met = [], None
        for mode in ("unbounded", "bounded"):
            ours = f"produce/single/bufferqueue_{mode}{s}"
            deque = speedup(ours, f"produce/single/mutex_deque_item{s}")
            tbb = speedup(ours, f"produce/single/tbb_push{s}")
            moody = speedup(ours, f"produce/single/moodycamel_enqueue{s}")
            slower = None if not moody else 1 / moody
            mode_met = at_least(deque, 1) and at_least(tbb, 3)
            stretch = slower is not None and slower <= 2
            parts.append(f"{mode}{' (the target)' if met is None else ' (reported)'}: speed-up {fmt(deque)} over "
                         f"deque per item, {fmt(tbb)} over tbb{' - meets the bounds' if mode_met else ' - below'}; "
                         f"time {fmt(slower)} that of moodycamel enqueue"
                         f"{' (stretch met)' if stretch else ' (stretch not met)'}")
            met = mode_met if met is None else met
        target(status, 2, f"single-item produce ({p} producers) >= mutex+deque per item, >= 3x tbb "
               "(stretch: within 2x of moodycamel enqueue)", "; ".join(parts), met)

    if c:
        parts, met = [], True
        for batch in (1000, 100, 1):
            peer = "moodycamel_try_dequeue" if batch == 1 else "moodycamel_try_dequeue_bulk"
            value = speedup(f"consume/bufferqueue/batch:{batch}/c:{c}", f"consume/{peer}/batch:{batch}/c:{c}")
            parts.append(f"batch {batch}: speed-up {fmt(value)} over {peer}")
            met = met and at_least(value, 2 if batch > 1 else 1)
        target(status, 3, f"batch consume ({c} consumers): >= 2x try_dequeue_bulk at 1000 and 100, "
               ">= try_dequeue at 1", "; ".join(parts), met)

    ours, floor = results.get("wakeup/bufferqueue", {}), results.get("wakeup/asio_post", {})
    if "p50_us" in ours and "p50_us" in floor:
        ratio = ours["p50_us"] / floor["p50_us"]
        target(status, 4, "wake-up p50 within 2x of a bare asio::post to an idle io_context thread",
               f"p50 {ours['p50_us']:.1f} us vs {floor['p50_us']:.1f} us = {ratio:.2f}x "
               f"(p99 {ours.get('p99_us', 0):.1f} vs {floor.get('p99_us', 0):.1f} us)", ratio <= 2)

    target(status, 5, "no heap allocation per produced or consumed item (memory topics, steady state)",
           "tests/allocation_test.cpp (a counting operator new; run by `scripts/run test`)", None)

    backlog, loop = results.get("memory/pending_1M_ints", {}), results.get("memory/rss_loop", {})
    if "ratio_to_raw" in backlog:
        growth = loop.get("rss_growth_kib")
        seconds = loop.get("time_us", 0) / 1e6
        flat = growth is not None and growth <= 1024
        target(status, 6, "1,000,000 pending ints <= 1.25x raw + constant; resident memory flat over a loop",
               f"{backlog['ratio_to_raw']:.3f}x raw ({backlog['bytes'] / 1e6:.2f} MB for 4.00 MB); "
               + (f"RSS growth {growth:.0f} KiB over {seconds:.0f} s "
                  f"({loop.get('items', 0) / 1e6:.0f} M items)" if growth is not None else "no RSS loop row"),
               backlog["ratio_to_raw"] <= 1.25 and flat)

    batch_1000 = results.get("mmap/produce/batch_1000", {})
    immediate = results.get("mmap/produce/immediate", {})
    msync = results.get("mmap/floor/msync_one_page", {})
    json_time, raw_time = time_of(results, "serializer/json"), time_of(results, "serializer/raw")
    if "time_us" in batch_1000 and "time_us" in immediate and "time_us" in msync and json_time and raw_time:
        rate = 1e6 / batch_1000["time_us"]
        floor_ratio = msync["time_us"] / immediate["time_us"]
        raw_ratio = json_time / raw_time
        target(status, 7, "mmap: >= 1M records/s at flush_batch_size 1000; immediate >= 0.8x the one-page msync "
               "floor; raw >= 10x faster than json", f"{rate / 1e6:.2f} M records/s; immediate at "
               f"{floor_ratio:.2f}x the msync floor ({immediate['time_us']:.0f} vs {msync['time_us']:.0f} us); "
               f"raw serializer {raw_ratio:.0f}x faster than json", rate >= 1e6 and floor_ratio >= 0.8 and raw_ratio >= 10)

    # Issue 16, section 2: durable produce under concurrency (group commit) and the durable peers.
    # The rows move different numbers of records per iteration, so these ratios compare records/s.
    def rate_of(name):
        entry = results.get(name, {})
        return entry.get("items_per_second") if "time_us" in entry else None

    def faster(ours, peer):
        ours_rate, peer_rate = rate_of(ours), rate_of(peer)
        return ours_rate / peer_rate if ours_rate and peer_rate else None

    def krate(name):
        value = rate_of(name)
        return "n/a" if value is None else f"{value / 1e3:.1f} k/s"

    four, one = "mmap/produce/immediate_concurrent/p:4", "mmap/produce/immediate_concurrent/p:1"
    floor = "mmap/floor/msync_per_record_64B"
    if rate_of(four):
        scaling, over_floor = faster(four, one), faster(four, floor)
        target(status, "16.2a", "durable produce, 4 producers on one immediate partition >= 3x one producer and "
               ">= 3x the one-msync-per-record floor", f"{krate(four)} vs {krate(one)} = {fmt(scaling)}; floor "
               f"{krate(floor)} = {fmt(over_floor)}", at_least(scaling, 3) and at_least(over_floor, 3))
    span = "mmap/produce/immediate_span_1000"
    rows = [("per record (ours: 4 producers, group commit)", four, "per_record"),
            ("per 1,000 records (ours: one immediate produce of 1,000)", span, "per_1000")]
    for label, ours, suffix in rows:
        sqlite, rocksdb = f"mmap/peer/sqlite_wal_full/{suffix}", f"mmap/peer/rocksdb_sync/{suffix}"
        if rate_of(ours) and (sqlite in results or rocksdb in results):
            over_sqlite, over_rocksdb = faster(ours, sqlite), faster(ours, rocksdb)
            target(status, "16.2b", f"durable {label} >= 3x SQLite (WAL, synchronous=FULL) and RocksDB (sync)",
                   f"{krate(ours)}; SQLite {krate(sqlite)} = {fmt(over_sqlite)}; RocksDB {krate(rocksdb)} = "
                   f"{fmt(over_rocksdb)}", at_least(over_sqlite, 3) and at_least(over_rocksdb, 3))

    # Issue 27: process-shared topics, same run.
    exclusive, two = "shared/produce/batch_100/exclusive_process", "shared/produce/batch_100/processes:2"
    if rate_of(two):
        ratio = faster(two, exclusive)
        target(status, "27a", "batch produce from 2 processes into one shared topic >= 0.8x one process with the "
               "folder to itself (records/s in total)", f"{krate(two)} vs {krate(exclusive)} = {fmt(ratio)}",
               at_least(ratio, 0.8))
    four_processes, four_floor = "shared/produce/immediate/processes:4", "shared/floor/msync_per_4_records_64B"
    if rate_of(four_processes):
        ratio = faster(four_processes, four_floor)
        measured = f"{krate(four_processes)} vs {krate(four_floor)} = {fmt(ratio)}"
        bare = "shared/ceiling/bare_group_commit/processes:4"
        if rate_of(bare):
            # The ceiling on this machine: four processes with a bare group commit, no library.
            measured += (f"; a bare group commit without the library: {krate(bare)} = {fmt(faster(bare, four_floor))} "
                         f"of the floor, ours {fmt(faster(four_processes, bare))} of it")
        target(status, "27b", "immediate produce from 4 processes on one partition >= 0.8x the floor of one msync "
               "per four records", measured, at_least(ratio, 0.8))
    cross, same = results.get("shared/wakeup/cross_process", {}), results.get("shared/wakeup/same_process", {})
    if "p50_us" in cross and "p50_us" in same:
        ratio = cross["p50_us"] / same["p50_us"]
        target(status, "27c", "wake-up of a consumer parked in co_await consume() by an append in another process: "
               "p50 within 3x of the same within one process", f"p50 {cross['p50_us']:.1f} us (p99 "
               f"{cross['p99_us']:.1f}) vs {same['p50_us']:.1f} us (p99 {same['p99_us']:.1f}) = {ratio:.2f}x",
               ratio <= 3)

    # Issue 16, section 3: cost that does not grow with idle partitions or many groups.
    base = time_of(results, "scale/partitions:4")
    if base:
        parts, met = [], True
        for count in (15, 64, 1024, 16384):
            ratio = (time_of(results, f"scale/partitions:{count}") or 0) / base or None
            parts.append(f"{count} partitions: {fmt(ratio)} the 4-partition time")
            met = met and ratio is not None and ratio <= 2
        target(status, "16.3a", "one busy partition of 15, 64, 1,024 or 16,384 owned: per-item consume within 2x "
               "of 4 partitions (issue 28, target 3)", f"4 partitions {base / 1024 * 1e3:.0f} ns per item; " + "; ".join(parts), met)
    ten, thousand = rate_of("scale/groups:10"), rate_of("scale/groups:1000")
    if ten and thousand:
        ratio = ten / thousand
        target(status, "16.3b", "per-item cost at 1,000 groups within 2x of 10 groups",
               f"{1e9 / ten:.0f} ns per item and group at 10 groups, {1e9 / thousand:.0f} ns at 1,000 = "
               f"{fmt(ratio)}", ratio <= 2)
    # Issue 16, section 1: each peer at its best, on the path users run.
    def user_targets():
        limit, user_limit = time_of(results, "limit/memcpy_32KiB"), time_of(results, "user/limit/memcpy_32KiB")
        awaited_consumers = sorted({n.rsplit(":", 1)[1] for n in results if n.startswith("user/awaited_consume/")})
        uc = awaited_consumers[0] if awaited_consumers else None
        parts, met = [], True
        for batch in (1000, 100):
            shape = f"batch:{batch}/c:{uc}" if uc else None
            ratio = speedup(f"user/awaited_consume/bufferqueue/{shape}",
                            f"user/awaited_consume/moodycamel_blocking_best/{shape}") if shape else None
            parts.append(f"batch {batch}: {fmt(ratio)}")
            met = met and at_least(ratio, 2.5)
        target(status, "16.1a", "co_await consume() at batch 1000 and 100 >= 2.5x faster than moodycamel's best bulk "
               "dequeue (blocking queue, capacity, tokens)", "; ".join(parts), met)
        if p:
            s = f"/p:{p}"
            warm = speedup(f"produce/batch/bufferqueue_unbounded{s}", f"produce/batch/moodycamel_best_enqueue_bulk{s}")
            fresh = speedup(f"user/fresh_batch_produce/bufferqueue{s}",
                            f"user/fresh_batch_produce/moodycamel_best_enqueue_bulk{s}")
            target(status, "16.1b", "batch produce >= 3x faster than moodycamel's best enqueue_bulk (capacity, "
                   "token), fresh and warm topics", f"warm {fmt(warm)}; fresh {fmt(fresh)}",
                   at_least(warm, 3) and at_least(fresh, 3))
        parts, met = [], True
        for count in thread_counts(results, "produce"):
            s = f"/p:{count}"
            ratio = speedup(f"produce/single/moodycamel_best_token_enqueue{s}", f"produce/single/bufferqueue_unbounded{s}")
            parts.append(f"{count} threads: {fmt(ratio)} its time")
            met = met and ratio is not None and ratio <= 2
        target(status, "16.1c", "single-item produce within 2x of moodycamel with tokens (capacity reserved), at 2 "
               "and 12 producer threads", "; ".join(parts), met)
        parts, met = [], True
        for count in thread_counts(results, "produce"):
            s = f"/p:{count}"
            ratio = speedup(f"produce/single/bufferqueue_unbounded{s}", f"produce/single/bufferqueue_bounded{s}")
            parts.append(f"{count} threads: {fmt(ratio)} the unbounded time")
            met = met and ratio is not None and ratio <= 1.5
        target(status, "16.1d", "single-item produce on a bounded topic within 1.5x of unbounded", "; ".join(parts),
               met)
        if p and limit and user_limit and uc:
            batch_time = time_of(results, f"produce/batch/bufferqueue_unbounded/p:{p}")
            consume_time = time_of(results, f"user/awaited_consume/bufferqueue/batch:1000/c:{uc}")
            produce_ratio = batch_time / limit if batch_time else None
            consume_ratio = consume_time / user_limit if consume_time else None
            target(status, "16.1e", "moonshot: batch produce and co_await consume() at batch 1000 within 5x of a "
                   "memcpy of the 32 KiB", f"memcpy {limit:.2f} us; batch produce {fmt(produce_ratio)} its time; "
                   f"co_await consume {fmt(consume_ratio)} (memcpy {user_limit:.2f} us in that binary)",
                   produce_ratio is not None and produce_ratio <= 5 and consume_ratio is not None and consume_ratio <= 5)

    user_targets()

    # Issue 28: the same-run ratios its targets name (targets 1, 2, 4 and 5; target 3 is 16.3a).
    def issue_28_targets():
        counts = thread_counts(results, "produce")
        parts, met = [], bool(counts)
        for count in counts:
            s = f"/p:{count}"
            ratio = speedup(f"produce/single/moodycamel_best_token_enqueue{s}", f"produce/single/bufferqueue_unbounded{s}")
            bounded = speedup(f"produce/single/bufferqueue_unbounded{s}", f"produce/single/bufferqueue_bounded{s}")
            parts.append(f"{count} threads: {fmt(ratio)} moodycamel's time, bounded {fmt(bounded)} the unbounded time")
            met = met and ratio is not None and ratio <= 1.5 and bounded is not None and bounded <= 1.5
        if counts:
            target(status, "28.1", "single-item produce within 1.5x of moodycamel with tokens, and a bounded topic "
                   "within 1.5x of the unbounded time, at every producer count", "; ".join(parts), met)
        shapes = sorted({n.split("/", 3)[3] for n in results if n.startswith("user/awaited_consume/bufferqueue/")},
                        key=lambda shape: int(shape.split("/")[0].split(":")[1]))
        parts, met = [], bool(shapes)
        for shape in shapes:
            ratio = speedup(f"user/awaited_consume/bufferqueue/{shape}",
                            f"user/awaited_consume/moodycamel_blocking_best/{shape}")
            parts.append(f"{shape.split('/')[0].replace(':', ' ')}: {fmt(ratio)}")
            met = met and at_least(ratio, 2.5)
        if shapes:
            target(status, "28.2", "co_await consume() >= 2.5x faster than moodycamel's best bulk dequeue at batch "
                   "10, 100 and 1000 (speed-up)", "; ".join(parts), met)
        parts, met = [], None
        for name in sorted(n for n in results if n.startswith("items/") and "/bufferqueue/" in n):
            peer = name.replace("/bufferqueue/", "/moodycamel_best/" if name.startswith("items/produce/")
                                else "/moodycamel_blocking_best/")
            ratio = speedup(name, peer)
            if name.startswith("items/produce/") and "/single/" in name:
                bound, text = 1 / 1.5, "within 1.5x of its time"
            elif name.startswith("items/produce/"):
                bound, text = 3, ">= 3x faster"
            else:
                bound, text = 2.5, ">= 2.5x faster"
            row = name.split("/", 1)[1].replace("/bufferqueue", "").replace("/manual_time", "")
            parts.append(f"{row}: speed-up {fmt(ratio)} ({text})")
            met = (met is not False) and at_least(ratio, bound)
        if parts:
            target(status, "28.4", "real items moved in (64-byte struct, ~100-byte string) against moodycamel "
                   "at its best: the int targets", "; ".join(parts), met)
        limit, user_limit = time_of(results, "limit/memcpy_32KiB"), time_of(results, "user/limit/memcpy_32KiB")
        produce_time = time_of(results, f"produce/batch/bufferqueue_unbounded/p:{p}") if p else None
        consume_name = next((n for n in results if n.startswith("user/awaited_consume/bufferqueue/batch:1000/")), None)
        consume_time = time_of(results, consume_name) if consume_name else None
        if limit and user_limit and produce_time and consume_time:
            target(status, "28.5", "moonshot: batch produce and co_await consume() at batch 1000 within 5x of a "
                   "memcpy of the same bytes", f"batch produce {fmt(produce_time / limit)} the memcpy's time; "
                   f"co_await consume {fmt(consume_time / user_limit)}",
                   produce_time / limit <= 5 and consume_time / user_limit <= 5)

    issue_28_targets()

    # Issue 13: Kafka topics' overhead over a bare librdkafka producer / consumer loop, same run. Judged
    # on the raw-serializer rows (the same bytes as the bare loop, no encoding work); json reported.
    parts, met = [], True
    for kind in ("produce", "consume"):
        bare_time = time_of(results, f"kafka/{kind}/librdkafka")
        for row in ("bufferqueue_raw", "bufferqueue"):
            ours_time = time_of(results, f"kafka/{kind}/{row}")
            ratio = ours_time / bare_time if ours_time and bare_time else None
            parts.append(f"{kind} {'raw' if row.endswith('raw') else 'json (reported)'} {fmt(ratio)} the bare "
                         "loop's time" + (f" ({ours_time / 1e3:.1f} vs {bare_time / 1e3:.1f} ms)" if ratio else ""))
            if row.endswith("raw"):
                met = met and ratio is not None and ratio <= 1.25
    if time_of(results, "kafka/produce/librdkafka") or time_of(results, "kafka/consume/librdkafka"):
        target(status, 13, "Kafka topics (raw serializer): produce and consume within 1.25x the time of a bare "
               "librdkafka producer / consumer loop on the same mock cluster", "; ".join(parts), met)
    return status


def load_note(context):
    """The load average at the start, and whether other work competed: only when the 1-minute load
    reached the number of CPUs."""
    load_avg = context.get("load_avg") or []
    if not load_avg:
        return ""
    note = f"load average at the start {', '.join(f'{x:.2f}' for x in load_avg)}"
    cpus = context.get("num_cpus")
    if isinstance(cpus, int) and cpus > 0 and load_avg[0] >= cpus:
        note += (f" (at or above the {cpus} CPUs: other work competed for them and multi-thread rounds "
                 f"include scheduler delays)")
    return note + "; "


def markdown(context, results, status):
    lines = ["# Benchmark summary", ""]
    if context:
        lines.append(f"{context.get('host_name', '?')}: {context.get('num_cpus', '?')} CPUs at "
                     f"{context.get('mhz_per_cpu', '?')} MHz, {context.get('date', '')}, {load_note(context)}"
                     f"Google Benchmark library build: "
                     f"{context.get('library_build_type', '?')} (Debian's package; the benchmarks are -O2).")
        lines.append("")
    lines += ["Medians of the repetitions; time per round (8,192 items) unless stated. Ratio = ours / peer "
              "time from the same run: below 1 we are faster.", ""]
    for title, ours, peers in comparisons(results):
        lines += [f"## {title}", "", "| implementation | median time (us) | items/s | ours / peer |",
                  "|---|---:|---:|---:|"]
        ours_time = results[ours]["time_us"]
        for name in [ours] + peers:
            entry = results[name]
            if "time_us" not in entry:
                lines.append(f"| {name} | error: {entry.get('error')} | | |")
                continue
            rate = entry.get("items_per_second")
            ratio = "-" if name == ours else f"{ours_time / entry['time_us']:.2f}"
            extra = ""
            if "p50_us" in entry:
                extra = f" (p50 {entry['p50_us']:.1f} us, p99 {entry['p99_us']:.1f} us)"
            lines.append(f"| {name}{extra} | {entry['time_us']:.3f} | "
                         f"{'' if rate is None else f'{rate / 1e6:.2f} M'} | {ratio} |")
        lines.append("")
    shown = {name for _, ours, peers in comparisons(results) for name in [ours] + peers}
    others = sorted(set(results) - shown)
    if others:
        lines += ["## Other rows", "", "| benchmark | median time (us) | counters |", "|---|---:|---|"]
        for name in others:
            entry = results[name]
            counters = ", ".join(f"{k}={v:.4g}" for k, v in entry.items()
                                 if k not in ("time_us", "repetitions", "error") and isinstance(v, (int, float)))
            lines.append(f"| {name} | {entry.get('time_us', float('nan')):.3f} | {counters} |")
        lines.append("")
    lines += ["## Targets", "", "| # | target | measured (medians, same run) | status |", "|---|---|---|---|"]
    for item in status:
        verdict = {True: "met", False: "NOT met", None: "see tests"}[item["met"]]
        lines.append(f"| {item['target']} | {item['text']} | {item['measured']} | {verdict} |")
    lines.append("")
    return "\n".join(lines)


def chart(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [g for g in comparisons(results) if g[1].startswith(("produce", "consume"))]
    groups = [g for g in groups if "/p:12" not in g[1]]
    fig, axes = plt.subplots(len(groups), 1, figsize=(9, 1.0 + 0.42 * sum(1 + len(g[2]) for g in groups)),
                             squeeze=False)
    for axis, (title, ours, peers) in zip(axes[:, 0], groups):
        names = [ours] + peers
        times = [results[n]["time_us"] for n in names]
        labels = [n.split("/")[2] if n.startswith("produce") else n.split("/")[1] for n in names]
        colors = ["tab:green"] + ["tab:gray"] * len(peers)
        axis.barh(range(len(names)), times, color=colors)
        axis.set_yticks(range(len(names)), labels, fontsize=8)
        axis.invert_yaxis()
        axis.set_xlim(0, max(times) * 1.25)
        axis.set_title(title, fontsize=9)
        axis.tick_params(axis="x", labelsize=8)
        for index, value in enumerate(times):
            axis.text(value, index, f" {value:.0f} us", va="center", fontsize=7)
    axes[-1, 0].set_xlabel("median microseconds per 8,192 ints (shorter is faster)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--results")
    parser.add_argument("--markdown")
    parser.add_argument("--chart")
    parser.add_argument("--check", action="store_true")
    arguments = parser.parse_args()

    context, rows = load(arguments.inputs)
    results = medians(rows)
    status = targets(results)
    if arguments.results:
        with open(arguments.results, "w", encoding="utf-8") as file:
            json.dump({"context": context, "medians": results, "targets": status}, file, indent=2)
    if arguments.markdown:
        with open(arguments.markdown, "w", encoding="utf-8") as file:
            file.write(markdown(context, results, status))
    if arguments.chart:
        chart(results, arguments.chart)
    failed = {name: entry["error"] for name, entry in results.items() if entry.get("error")}
    for name, message in failed.items():
        print(f"benchmark {name} failed: {message}", file=sys.stderr)
    print(f"summarize: {len(results)} benchmarks, {len(failed)} failed")
    if arguments.check and (failed or not results):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
