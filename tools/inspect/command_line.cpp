#include "command_line.hpp"

#include <algorithm>
#include <iostream>

namespace bufferqueue_inspect_tool {

arguments parse(const std::vector<std::string>& words, const std::map<std::string, bool>& known)
{
    arguments parsed;
    for (std::size_t index = 0; index < words.size(); ++index) {
        const std::string& word = words[index];
        if (!word.starts_with("--")) {
            parsed.positional.push_back(word);
            continue;
        }
        const auto option = known.find(word);
        if (option == known.end()) {
            throw usage_error{"unknown option " + word};
        }
        if (parsed.options.contains(word)) {
            throw usage_error{"option " + word + " is given twice"};
        }
        std::string value;
        if (option->second) {
            if (index + 1 >= words.size()) {
                throw usage_error{"option " + word + " needs a value"};
            }
            value = words[++index];
        }
        parsed.options[word] = value;
    }
    return parsed;
}

void require_positional(const arguments& parsed, std::size_t count, const std::string& names)
{
    if (parsed.positional.size() != count) {
        throw usage_error{"expected " + names + " (got " + std::to_string(parsed.positional.size()) + " argument" +
                          (parsed.positional.size() == 1 ? "" : "s") + ")"};
    }
}

std::uint64_t parse_number(const std::string& text, const std::string& what)
{
    if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) {
        throw usage_error{what + " must be a non-negative integer, not '" + text + "'"};
    }
    return std::stoull(text);
}

void print_table(const std::vector<std::vector<std::string>>& rows)
{
    std::vector<std::size_t> widths;
    for (const auto& row : rows) {
        widths.resize(std::max(widths.size(), row.size()), 0);
        for (std::size_t column = 0; column < row.size(); ++column) {
            widths[column] = std::max(widths[column], row[column].size());
        }
    }
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t column = 0; column < row.size(); ++column) {
            line += row[column];
            if (column + 1 < row.size()) {
                line += std::string(widths[column] - row[column].size() + 2, ' ');
            }
        }
        std::cout << line << '\n';
    }
}

}  // namespace bufferqueue_inspect_tool
