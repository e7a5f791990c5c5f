// Test support: real processes for tests of code that spans them - a forked child running a
// function, and a pipe for one-byte signals between parent and child.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <utility>

namespace bufferqueue::test {

/// A forked child process that runs `body` and exits with its return value (101 when it throws). The
/// child never returns into the test framework: it leaves with `_exit`. Destroying a child that
/// still runs kills it (SIGKILL) and reaps it. Fork only from a test's main thread, before it starts
/// threads of its own, or keep the child's body to async-signal-safe work plus what it sets up itself.
class child_process {
public:
    explicit child_process(const std::function<int()>& body)
    {
        // What the parent buffered must not be written again by the child.
        std::fflush(nullptr);
        std::cout.flush();
        pid_ = ::fork();
        if (pid_ == -1) {
            throw std::runtime_error("fork failed");
        }
        if (pid_ == 0) {
            int status = 101;
            try {
                status = body();
            } catch (...) {
                status = 101;
            }
            ::_exit(status);
        }
    }

    child_process(const child_process&) = delete;
    child_process& operator=(const child_process&) = delete;

    ~child_process()
    {
        if (pid_ > 0 && !reaped_) {
            ::kill(pid_, SIGKILL);
            wait();
        }
    }

    /// The child's process id.
    pid_t pid() const noexcept { return pid_; }

    /// Sends `signal` to the child.
    void kill(int signal = SIGKILL) const noexcept { ::kill(pid_, signal); }

    /// Waits for the child to end: its exit status, or 128 + the signal that ended it.
    int wait()
    {
        if (!reaped_) {
            int status = 0;
            while (::waitpid(pid_, &status, 0) == -1 && errno == EINTR) {
            }
            reaped_ = true;
            status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        return status_;
    }

private:
    pid_t pid_ = -1;
    bool reaped_ = false;
    int status_ = 0;
};

/// A pipe carrying one-byte signals from one process to another (make it before forking).
class signal_pipe {
public:
    signal_pipe()
    {
        if (::pipe(ends_.data()) != 0) {
            throw std::runtime_error("pipe failed");
        }
    }
    signal_pipe(const signal_pipe&) = delete;
    signal_pipe& operator=(const signal_pipe&) = delete;
    ~signal_pipe()
    {
        ::close(ends_[0]);
        ::close(ends_[1]);
    }

    /// Sends one byte; true when it was written.
    bool send(char byte = 'x') const noexcept { return ::write(ends_[1], &byte, 1) == 1; }

    /// Waits for one byte; true when one arrived (false when every writer closed its end).
    bool receive() const noexcept
    {
        char byte = 0;
        ssize_t result = 0;
        while ((result = ::read(ends_[0], &byte, 1)) == -1 && errno == EINTR) {
        }
        return result == 1;
    }

    /// The next byte if one arrives within `timeout`, else nothing.
    std::optional<char> receive_within(std::chrono::milliseconds timeout) const noexcept
    {
        pollfd readable{.fd = ends_[0], .events = POLLIN, .revents = 0};
        if (::poll(&readable, 1, static_cast<int>(timeout.count())) != 1) {
            return std::nullopt;
        }
        char byte = 0;
        return ::read(ends_[0], &byte, 1) == 1 ? std::optional<char>(byte) : std::nullopt;
    }

private:
    std::array<int, 2> ends_{};
};

}  // namespace bufferqueue::test
