// Poisoned on purpose: every consumer program of tests/package/ searches tests/package/poisoned_fmt
// first, so a bufferqueue header that includes {fmt} fails its build here. fmt is a private dependency
// of the library's compiled parts (header-only mode, CMakeLists.txt); headers format their messages
// through bufferqueue/detail/message.hpp.
#error "a bufferqueue header included {fmt} (fmt must stay private to the library's compiled parts)"
