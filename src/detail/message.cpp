// detail::vformat_message: the headers' messages, formatted with {fmt} (a private dependency).
#include "bufferqueue/detail/message.hpp"

#include <fmt/args.h>
#include <fmt/format.h>

#include <iterator>
#include <string>

namespace bufferqueue::detail {

namespace {

void push(fmt::dynamic_format_arg_store<fmt::format_context>& store, const message_argument& argument)
{
    switch (argument.type()) {
    case message_argument::kind::text: store.push_back(fmt::string_view(argument.text())); break;
    case message_argument::kind::signed_integer: store.push_back(argument.signed_integer()); break;
    case message_argument::kind::unsigned_integer: store.push_back(argument.unsigned_integer()); break;
    case message_argument::kind::floating: store.push_back(argument.floating()); break;
    }
}

void append(std::string& text, const message_argument& argument)
{
    switch (argument.type()) {
    case message_argument::kind::text: text += argument.text(); break;
    case message_argument::kind::signed_integer:
        fmt::format_to(std::back_inserter(text), "{}", argument.signed_integer());
        break;
    case message_argument::kind::unsigned_integer:
        fmt::format_to(std::back_inserter(text), "{}", argument.unsigned_integer());
        break;
    case message_argument::kind::floating: fmt::format_to(std::back_inserter(text), "{}", argument.floating()); break;
    }
}

}  // namespace

std::string vformat_message(std::string_view format, std::span<const message_argument> arguments)
{
    fmt::dynamic_format_arg_store<fmt::format_context> store;
    store.reserve(arguments.size(), 0);
    for (const message_argument& argument : arguments) {
        push(store, argument);
    }
    try {
        return fmt::vformat(fmt::string_view(format), store);
    } catch (const fmt::format_error&) {
        std::string text(format);
        text += " [";
        for (std::size_t index = 0; index < arguments.size(); ++index) {
            text += index == 0 ? "" : ", ";
            append(text, arguments[index]);
        }
        text += ']';
        return text;
    }
}

}  // namespace bufferqueue::detail
