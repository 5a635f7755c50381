// GGUF reading (llama.cpp's model file format, versions 2 and 3): header, metadata of every value type, tensor
// infos, alignment and the data section, over a read-only memory map (tensor bytes are never copied).
//
// Layout (little-endian): "GGUF" | u32 version | u64 n_tensors | u64 n_kv | n_kv key-value pairs | n_tensors
// tensor infos | zero padding to the alignment | data. A string is u64 length + bytes; a key-value pair is a
// string key, a u32 value type and the value; an array value is u32 element type + u64 count + packed elements.
// A tensor info is string name | u32 n_dims | u64 ne[n_dims] | u32 ggml type | u64 offset into the data
// section; ne[0] is the innermost (contiguous) dimension. Every way a file can be malformed is reported as a
// hymoe::Error naming the file and the key or tensor at fault; no check reads outside the mapping, and nothing is
// allocated from a count before the count is checked against the bytes that remain.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hymoe/ggml_type.h"
#include "hymoe/mapped_file.h"
#include "hymoe/tensor.h"

namespace hymoe {

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "UINT32", "ARRAY", ... (the GGUF specification's spelling); "type <n>" for an unknown id.
std::string gguf_value_type_name(uint32_t type);

// One metadata value. It views the file image (strings and packed arrays are not copied); it stays valid as long
// as the GgufFile it came from (or a copy of it) lives.
class GgufValue {
 public:
  GgufValueType type() const { return type_; }
  // Arrays: the element type and count. element(i) is element i as a value of its own (any element type).
  GgufValueType element_type() const { return element_type_; }
  uint64_t size() const { return count_; }
  GgufValue element(uint64_t i) const;

  // Scalars. Each requires the value's type to be one it covers (HYMOE_CHECK); callers check type() first or
  // use GgufFile's typed lookups, which report a wrong type as a user error.
  uint64_t as_uint() const;     // UINT8/16/32/64, BOOL
  int64_t as_int() const;       // INT8/16/32/64
  double as_float() const;      // FLOAT32/64
  bool as_bool() const;         // BOOL: any non-zero byte is true, as in ggml
  std::string_view as_string() const;  // STRING (the bytes as stored)

  // The value as text for listings: strings quoted, arrays as "[a, b, ... (n elements)]" showing at most
  // `max_elements` elements.
  std::string to_display(size_t max_elements = 8) const;

 private:
  friend class GgufParser;
  GgufValueType type_ = GgufValueType::kUint8;
  GgufValueType element_type_ = GgufValueType::kUint8;
  uint64_t count_ = 0;
  std::span<const std::byte> raw_;         // scalar bytes, string bytes, or packed fixed-size elements
  std::vector<GgufValue> elements_;       // arrays of strings or of arrays: one entry per element
};

struct GgufTensorInfo {
  std::string name;
  uint32_t type = 0;                // ggml type id (known: ggml_type_traits(type) != nullptr)
  uint32_t n_dims = 0;
  std::array<uint64_t, 4> ne{1, 1, 1, 1};  // ggml order: ne[0] innermost; unused dimensions are 1
  uint64_t offset = 0;              // into the data section
  uint64_t nbytes = 0;
  uint64_t row_bytes = 0;           // bytes of one ne[0]-long row

  uint64_t numel() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  uint64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  // The numpy/PyTorch shape: ne[0 .. n_dims) reversed.
  Shape shape() const;
  // "[256, 512, 8]": ne[0 .. n_dims) in ggml order, as messages and listings show it.
  std::string ne_text() const;
  GgmlType ggml_type() const { return static_cast<GgmlType>(type); }
};

struct GgufReadOptions {
  // The specification allows arrays of arrays; ggml rejects them, and so does hymoe unless asked.
  bool allow_nested_arrays = false;
};

class GgufFile {
 public:
  // Limits beyond ggml's own, so a hostile file cannot make the reader spend unbounded time or memory.
  static constexpr uint32_t kMaxDims = 4;
  static constexpr uint64_t kMaxStringBytes = 1ull << 30;  // ggml's limit for keys; applied to every string
  static constexpr uint64_t kMaxNameBytes = 63;             // ggml's GGML_MAX_NAME - 1
  static constexpr int kMaxArrayDepth = 4;                  // nested arrays, when allowed

  // Maps and validates `path`. Throws hymoe::Error naming the path and what is wrong.
  static GgufFile open(const std::string& path, GgufReadOptions options = {});
  // Validates an in-memory image; `label` stands for the file name in messages.
  static GgufFile from_bytes(std::vector<std::byte> bytes, std::string label, GgufReadOptions options = {});
  // Validates an image already opened (MappedFile::open: a mapped file or a stream's bytes), so a caller that looked
  // at its first bytes to choose the reader never opens the name twice.
  static GgufFile open(std::shared_ptr<const MappedFile> image, std::string label, GgufReadOptions options = {});

  const std::string& label() const { return label_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute file offset of the data section
  uint64_t file_bytes() const { return image_.size(); }

  // Metadata in file order; find() returns nullptr for an absent key.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;
  // Typed lookups as llama.cpp does them: nullopt when absent; an error naming the file, key, its type and the
  // expected type when the key holds another type.
  std::optional<uint32_t> get_u32(std::string_view key) const;
  std::optional<float> get_f32(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  // get_u32 for a key that must be present (an error naming the file and the key otherwise).
  uint32_t require_u32(std::string_view key) const;
  // A FLOAT32 key llama.cpp reads per block (get_key_or_arr): one value for every block, or an array of FLOAT32
  // with one entry per block (block_count of them), block `block`'s returned. nullopt when absent; an error naming
  // the file and key for another type or length.
  std::optional<float> get_f32_of_block(std::string_view key, uint32_t block, uint32_t block_count) const;

  // Tensors in info order (which is also data order: offsets are the running sum of padded sizes).
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  bool contains(std::string_view name) const { return index_.find(name) != index_.end(); }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // Throws naming the file and the tensor when absent.
  const GgufTensorInfo& tensor(std::string_view name) const;
  std::span<const std::byte> bytes(const GgufTensorInfo& info) const;
  std::span<const std::byte> bytes(std::string_view name) const { return bytes(tensor(name)); }

 private:
  friend class GgufParser;
  std::shared_ptr<const MappedFile> storage_;
  std::span<const std::byte> image_;
  std::string label_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t, std::less<>> key_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace hymoe
