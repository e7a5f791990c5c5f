// Internal: readable item-type names for error messages.
#pragma once

#include <string>
#include <typeinfo>

namespace bufferqueue::detail {

/// The demangled name of a type, for messages (the mangled one where the platform cannot
/// demangle). Allocates. Compiled once (src/detail/type_name.cpp).
std::string readable_type_name(const std::type_info& type);

template <class T>
std::string readable_type_name()
{
    return readable_type_name(typeid(T));
}

}  // namespace bufferqueue::detail
