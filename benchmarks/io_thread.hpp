// What the latency benchmarks (bench_end_to_end, bench_shared) share: an io_context on a thread of
// its own, and the report of latency samples.
#pragma once

#include "bench_support.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <thread>
#include <vector>

namespace bufferqueue::bench {

/// An io_context run by its own thread until destroyed.
class io_thread {
public:
    io_thread() : guard_(io_.get_executor()), thread_([this] { io_.run(); }) {}
    io_thread(const io_thread&) = delete;
    io_thread& operator=(const io_thread&) = delete;
    ~io_thread()
    {
        guard_.reset();
        io_.stop();
        thread_.join();
    }
    boost::asio::io_context& context() noexcept { return io_; }

private:
    boost::asio::io_context io_;
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
    std::thread thread_;
};

/// Reports `samples` (seconds) as the counters p50_us and p99_us.
inline void report_latencies(benchmark::State& state, std::vector<double>& samples)
{
    state.counters["p50_us"] = quantile(samples, 0.50) * 1e6;
    state.counters["p99_us"] = quantile(samples, 0.99) * 1e6;
}

}  // namespace bufferqueue::bench
