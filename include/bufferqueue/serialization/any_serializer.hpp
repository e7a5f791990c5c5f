// bufferqueue: a type-erased serializer, so topic options can hold any `serializer_for<S, T>`.
#pragma once

#include "bufferqueue/serialization/serializer.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace bufferqueue {

namespace detail {

/// The name of `Type` as the compiler spells it (from `__PRETTY_FUNCTION__`; GCC and clang spell a
/// few names differently, such as `std::__cxx11::basic_string`). Never throws.
template <class Type>
constexpr std::string_view type_name() noexcept
{
    const std::string_view function = __PRETTY_FUNCTION__;
    constexpr std::string_view marker = "Type = ";
    const std::size_t start = function.find(marker) + marker.size();
    std::size_t end = function.find(';', start);  // GCC: "[with Type = X; ...]"
    if (end == std::string_view::npos) {
        end = function.rfind(']');  // clang: "[Type = X]"
    }
    return function.substr(start, end - start);
}

}  // namespace detail

/// Holds any serializer `S` that satisfies `serializer_for<S, T>` behind one virtual call per
/// record. Copies share the wrapped instance, which is called concurrently from every partition of
/// a topic (so it must be thread-safe, as `serializer_for` requires). Allocates once when made.
template <class T>
class any_serializer {
public:
    /// Wraps `serializer`.
    template <class Serializer>
        requires(!std::same_as<std::remove_cvref_t<Serializer>, any_serializer> &&
                 serializer_for<std::remove_cvref_t<Serializer>, T>)
    any_serializer(Serializer&& serializer)  // NOLINT(google-explicit-constructor): designated initializers need it
        : implementation_(
              std::make_shared<model<std::remove_cvref_t<Serializer>>>(std::forward<Serializer>(serializer)))
    {
    }

    /// Appends the encoding of `item` to `out`.
    void serialize(const T& item, std::vector<std::byte>& out) const { implementation_->serialize(item, out); }

    /// Decodes one item; throws `bufferqueue::error` (`errc::corrupt_data`) for a malformed payload.
    T deserialize(std::span<const std::byte> bytes) const { return implementation_->deserialize(bytes); }

    /// The wrapped serializer's type, as the compiler spells it (process-shared topics compare it
    /// across processes). Never throws.
    std::string_view type_name() const noexcept { return implementation_->type_name(); }

private:
    struct concept_type {
        virtual ~concept_type() = default;
        virtual void serialize(const T& item, std::vector<std::byte>& out) const = 0;
        virtual T deserialize(std::span<const std::byte> bytes) const = 0;
        virtual std::string_view type_name() const noexcept = 0;
    };

    template <class Serializer>
    struct model final : concept_type {
        explicit model(Serializer wrapped) : serializer(std::move(wrapped)) {}
        void serialize(const T& item, std::vector<std::byte>& out) const override { serializer.serialize(item, out); }
        T deserialize(std::span<const std::byte> bytes) const override { return serializer.deserialize(bytes); }
        std::string_view type_name() const noexcept override { return detail::type_name<Serializer>(); }
        Serializer serializer;
    };

    std::shared_ptr<const concept_type> implementation_;
};

}  // namespace bufferqueue
