// Poisoned on purpose: the core consumer (package_core_consumer) searches this folder first, so a
// core header that includes nlohmann_json or msgpack-cxx fails its build here.
#error "a bufferqueue core header included nlohmann_json or msgpack-cxx (the core component must need only Boost)"
