// Readable item-type names: detail/type_name.hpp.
#include "bufferqueue/detail/type_name.hpp"

#include <cstdlib>
#include <memory>

#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#define BUFFERQUEUE_HAS_CXXABI 1
#endif

namespace bufferqueue::detail {

std::string readable_type_name(const std::type_info& type)
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

}  // namespace bufferqueue::detail
