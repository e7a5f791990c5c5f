# Writes and installs the pkg-config files beside the CMake package (README.md, "Using it from CMake"):
#   bufferqueue-core.pc  the core component: memory topics, producers, pull and push consumers (Boost)
#   bufferqueue.pc       everything: core plus the mmap component (nlohmann_json, msgpack-cxx)
# Both are relocatable (prefix=${pcfiledir}/...). They carry the dependencies' include directories
# (those the compiler does not search anyway) and compile definitions, read from the imported
# targets; the C++ standard (-std=c++20 or newer) is the consumer's to choose.
include_guard(GLOBAL)

# Appends to `flags_variable` the -I and -D flags of `target` and, recursively, of the targets it
# links. Entries with generator expressions are skipped (a .pc file has no configuration).
function(bufferqueue_pkg_config_flags flags_variable)
    set(flags "${${flags_variable}}")
    set(pending ${ARGN})
    set(visited "")
    while(pending)
        list(POP_FRONT pending target)
        if(NOT TARGET "${target}" OR target IN_LIST visited)
            continue()
        endif()
        list(APPEND visited "${target}")
        get_target_property(directories "${target}" INTERFACE_INCLUDE_DIRECTORIES)
        foreach(directory IN LISTS directories)
            if(directory AND NOT directory MATCHES "\\$<" AND NOT directory IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES
               AND NOT "-I${directory}" IN_LIST flags)
                list(APPEND flags "-I${directory}")
            endif()
        endforeach()
        get_target_property(definitions "${target}" INTERFACE_COMPILE_DEFINITIONS)
        foreach(definition IN LISTS definitions)
            if(definition AND NOT definition MATCHES "\\$<" AND NOT "-D${definition}" IN_LIST flags)
                list(APPEND flags "-D${definition}")
            endif()
        endforeach()
        get_target_property(linked "${target}" INTERFACE_LINK_LIBRARIES)
        if(linked)
            list(APPEND pending ${linked})
        endif()
    endwhile()
    set(${flags_variable} "${flags}" PARENT_SCOPE)
endfunction()

file(RELATIVE_PATH BUFFERQUEUE_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
set(BUFFERQUEUE_PC_PREFIX "\${pcfiledir}/${BUFFERQUEUE_PC_TO_PREFIX}")

set(BUFFERQUEUE_PC_CORE_FLAGS "")
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # As target bufferqueue::core does (CMakeLists.txt): the library was built with clang.
    foreach(definition IN LISTS BUFFERQUEUE_CLANG_DEFINITIONS)
        list(APPEND BUFFERQUEUE_PC_CORE_FLAGS "-D${definition}")
    endforeach()
endif()
bufferqueue_pkg_config_flags(BUFFERQUEUE_PC_CORE_FLAGS Boost::headers)
list(JOIN BUFFERQUEUE_PC_CORE_FLAGS " " BUFFERQUEUE_PC_CORE_CFLAGS)
set(BUFFERQUEUE_PC_MMAP_FLAGS "")
bufferqueue_pkg_config_flags(BUFFERQUEUE_PC_MMAP_FLAGS nlohmann_json::nlohmann_json ${BUFFERQUEUE_MSGPACK_TARGET})
list(JOIN BUFFERQUEUE_PC_MMAP_FLAGS " " BUFFERQUEUE_PC_MMAP_CFLAGS)

file(WRITE "${PROJECT_BINARY_DIR}/pkgconfig/bufferqueue-core.pc" "\
prefix=${BUFFERQUEUE_PC_PREFIX}
includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}

Name: bufferqueue-core
Description: bufferqueue core: memory topics, producers, pull and push consumers (Boost.Asio only)
Version: ${PROJECT_VERSION}
Cflags: -I\${includedir} ${BUFFERQUEUE_PC_CORE_CFLAGS}
Libs: -L\${libdir} -lbufferqueue_core -pthread
")
file(WRITE "${PROJECT_BINARY_DIR}/pkgconfig/bufferqueue.pc" "\
prefix=${BUFFERQUEUE_PC_PREFIX}
includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}

Name: bufferqueue
Description: bufferqueue: typed topics, consumer groups, memory and persistent (mmap) storage
Version: ${PROJECT_VERSION}
Requires: bufferqueue-core = ${PROJECT_VERSION}
Cflags: ${BUFFERQUEUE_PC_MMAP_CFLAGS}
Libs: -L\${libdir} -lbufferqueue_mmap
")
install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/bufferqueue-core.pc" "${PROJECT_BINARY_DIR}/pkgconfig/bufferqueue.pc"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
