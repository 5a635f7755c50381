// Hand-built GGUF images for tests: a little-endian writer, key-value pairs and a file builder that lays out
// tensor infos, offsets, padding and data the way ggml's writer does, with hooks to break each part.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hymoe::test::gguf {

// Little-endian byte writer for hand-built GGUF images.
struct Writer {
  std::vector<std::byte> bytes;
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof v);
  }
  void str(std::string_view s) {
    put<uint64_t>(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    bytes.insert(bytes.end(), p, p + s.size());
  }
};

using KeyValue = std::function<void(Writer&)>;

inline KeyValue kv_u32(std::string key, uint32_t v) {
  return [=](Writer& w) {
    w.str(key);
    w.put<uint32_t>(4);
    w.put(v);
  };
}
inline KeyValue kv_string(std::string key, std::string v) {
  return [=](Writer& w) {
    w.str(key);
    w.put<uint32_t>(8);
    w.str(v);
  };
}
// A key with a value written by `value` after the type.
inline KeyValue kv_raw(std::string key, uint32_t type, std::function<void(Writer&)> value) {
  return [=](Writer& w) {
    w.str(key);
    w.put(type);
    value(w);
  };
}

struct TensorSpec {
  std::string name;
  uint32_t type = 0;  // F32
  std::vector<uint64_t> ne;
  std::optional<uint64_t> offset;  // default: the running padded offset
  uint64_t nbytes = 0;             // data bytes written for it (default: from type and ne)
};

struct FileSpec {
  uint32_t version = 3;
  std::vector<KeyValue> kvs;
  std::vector<TensorSpec> tensors;
  uint64_t alignment = 32;
  std::optional<uint64_t> n_kv, n_tensors;  // override the counts
  size_t truncate_to = SIZE_MAX;
  std::optional<uint8_t> data_fill;  // every data byte (default: a pattern that differs per tensor)
};

inline uint64_t pad(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

inline std::vector<std::byte> build(const FileSpec& spec) {
  Writer w;
  w.bytes = {std::byte{'G'}, std::byte{'G'}, std::byte{'U'}, std::byte{'F'}};
  w.put(spec.version);
  w.put<uint64_t>(spec.n_tensors.value_or(spec.tensors.size()));
  w.put<uint64_t>(spec.n_kv.value_or(spec.kvs.size()));
  for (const auto& kv : spec.kvs) kv(w);
  uint64_t running = 0;
  std::vector<uint64_t> sizes;
  for (const auto& t : spec.tensors) {
    w.str(t.name);
    w.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t n : t.ne) w.put(n);
    w.put(t.type);
    uint64_t nbytes = t.nbytes;
    if (nbytes == 0 && t.type == 0) {  // F32 data for small shapes; huge (malformed) ones get none
      nbytes = 4;
      for (uint64_t n : t.ne) nbytes = n > (1u << 20) || nbytes > (1u << 20) ? 0 : nbytes * n;
    }
    w.put<uint64_t>(t.offset.value_or(running));
    running += pad(nbytes, spec.alignment);
    sizes.push_back(nbytes);
  }
  w.bytes.resize(pad(w.bytes.size(), spec.alignment));
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (uint64_t b = 0; b < sizes[i]; ++b)
      w.bytes.push_back(static_cast<std::byte>(spec.data_fill.value_or(static_cast<uint8_t>((i * 31 + b) & 0xff))));
    w.bytes.resize(pad(w.bytes.size(), spec.alignment));
  }
  if (spec.truncate_to < w.bytes.size()) w.bytes.resize(spec.truncate_to);
  return w.bytes;
}

}  // namespace hymoe::test::gguf
