// bufferqueue-inspect's command line: the arguments after the command, checked against the
// options a command knows, and the aligned tables it prints (docs/inspect.md). Tool code only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bufferqueue_inspect_tool {

/// A usage mistake: printed with the usage text, exit status 2.
struct usage_error {
    std::string message;
};

/// The command line after the command: positional arguments and options.
struct arguments {
    std::vector<std::string> positional;
    std::map<std::string, std::string> options;  // "--from" -> "3"; flags map to ""
};

/// Splits `words` into positional arguments and the options of `known` (true: takes a value).
/// Throws `usage_error` for an unknown option, one given twice or one missing its value.
arguments parse(const std::vector<std::string>& words, const std::map<std::string, bool>& known);

/// Throws `usage_error` ("expected `names` (got N arguments)") unless there are `count` positionals.
void require_positional(const arguments& parsed, std::size_t count, const std::string& names);

/// `text` as a non-negative integer; throws `usage_error` naming `what` otherwise.
std::uint64_t parse_number(const std::string& text, const std::string& what);

/// Prints `rows` to standard output, each column padded to its widest cell plus two spaces.
void print_table(const std::vector<std::vector<std::string>>& rows);

}  // namespace bufferqueue_inspect_tool
