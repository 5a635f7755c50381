// safetensors reading (memory-mapped, fully validated) and writing (atomic: a complete file or none).
//
// Format: u64 little-endian header length N, N bytes of UTF-8 JSON mapping tensor names to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data section) plus an optional
// "__metadata__" string map, then the data section. Every way a file can be malformed is reported as a
// hymoe::Error naming the file and the problem; no check reads outside the mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hymoe/dtype.h"
#include "hymoe/file_io.h"
#include "hymoe/mapped_file.h"
#include "hymoe/tensor.h"

namespace hymoe {

struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0;  // byte offsets into the data section
  uint64_t end = 0;
  uint64_t bytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // Headers larger than this are rejected before they are parsed (the reference implementation uses 100 MB).
  static constexpr uint64_t kMaxHeaderBytes = 100u << 20;

  // Maps (a regular file) or reads (a stream, within max_streamed_input_bytes()) and validates `path`. Throws
  // hymoe::Error naming the path and what is wrong.
  static SafetensorsFile open(const std::string& path);
  static SafetensorsFile open(const InputFile& file);  // the file already opened (a stream is read whole)
  // Validates an in-memory image; `label` stands for the file name in messages.
  static SafetensorsFile from_bytes(std::vector<std::byte> bytes, std::string label);
  // Validates an image already opened (MappedFile::open), as GgufFile::open(image, label).
  static SafetensorsFile open(std::shared_ptr<const MappedFile> image, std::string label);

  const std::string& label() const { return label_; }
  // Tensors in data order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const;
  // Throws naming the file and the tensor when absent.
  const TensorInfo& info(const std::string& name) const;
  std::span<const std::byte> bytes(const std::string& name) const;
  // The tensor converted to float32 (every dtype converts; 64-bit integers may round).
  Tensor read_f32(const std::string& name) const;
  // read_f32 with a required shape: a mismatch is an error naming file, tensor, expected and actual shapes.
  Tensor read_f32(const std::string& name, const Shape& expected_shape) const;

 private:
  struct Storage;
  void parse();
  void check_data_section_covered() const;
  std::shared_ptr<const Storage> storage_;
  std::string label_;
  std::span<const std::byte> data_;  // the data section
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// One stored element of `dtype` at `p` as float32 (what read_f32 does per element; 64-bit integers may round).
float element_to_float(DType dtype, const std::byte* p);

class SafetensorsWriter {
 public:
  void add(const std::string& name, const Tensor& tensor);  // stored as F32
  void add_raw(const std::string& name, DType dtype, const Shape& shape, std::vector<std::byte> bytes);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  // The whole file image.
  std::vector<std::byte> serialize() const;
  // Writes to a temporary file beside `path` and renames it into place, so a failure leaves no partial file.
  void write(const std::string& path) const;

 private:
  struct Entry {
    DType dtype;
    Shape shape;
    std::vector<std::byte> bytes;
  };
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace hymoe
