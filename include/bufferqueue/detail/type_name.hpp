// Internal: readable item-type names for error messages.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <typeinfo>

#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#define BUFFERQUEUE_HAS_CXXABI 1
#endif

namespace bufferqueue::detail {

/// The demangled name of a type, for messages. Allocates.
inline std::string readable_type_name(const std::type_info& type)
{
#ifdef BUFFERQUEUE_HAS_CXXABI
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status),
                                                     std::free);
    if (status == 0 && demangled) {
        return demangled.get();
    }
#endif
    return type.name();
}

template <class T>
std::string readable_type_name()
{
    return readable_type_name(typeid(T));
}

}  // namespace bufferqueue::detail
