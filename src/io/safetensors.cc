// safetensors reader and writer. The reader trusts nothing in the file: every length, offset and shape is
// checked against the mapping before any tensor byte is touched (this file is the fuzz target's subject).
#include "hymoe/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "hymoe/error.h"
#include "hymoe/file_io.h"
#include "hymoe/mapped_file.h"
#include "io/json_io.h"

namespace hymoe {

// The file image (declared in the header, which does not need to know how it is held).
struct SafetensorsFile::Storage {
  std::shared_ptr<const MappedFile> file;
  std::span<const std::byte> view() const { return file->view(); }
};

namespace {

uint64_t read_u64_le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(p[i]);
  return v;
}

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

float element_to_float(DType dtype, const std::byte* p) {
  switch (dtype) {
    case DType::kF64: return static_cast<float>(load<double>(p));
    case DType::kF32: return load<float>(p);
    case DType::kF16: return f16_to_float(load<uint16_t>(p));
    case DType::kBF16: return bf16_to_float(load<uint16_t>(p));
    case DType::kI64: return static_cast<float>(load<int64_t>(p));
    case DType::kI32: return static_cast<float>(load<int32_t>(p));
    case DType::kI16: return static_cast<float>(load<int16_t>(p));
    case DType::kI8: return static_cast<float>(load<int8_t>(p));
    case DType::kU64: return static_cast<float>(load<uint64_t>(p));
    case DType::kU32: return static_cast<float>(load<uint32_t>(p));
    case DType::kU16: return static_cast<float>(load<uint16_t>(p));
    case DType::kU8: return static_cast<float>(load<uint8_t>(p));
    case DType::kBool: return load<uint8_t>(p) != 0 ? 1.0f : 0.0f;
    case DType::kF8E4M3: return f8_e4m3_to_float(load<uint8_t>(p));
  }
  return 0.0f;
}

namespace {

// A JSON integer that fits uint64, or an error naming where it was expected.
uint64_t json_u64(const nlohmann::json& value, const std::string& label, const std::string& what) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return static_cast<uint64_t>(value.get<int64_t>());
  fail(label, ": ", what, " must be a non-negative integer, got ", describe_json(value));
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) { return open(InputFile(path)); }

SafetensorsFile SafetensorsFile::open(const InputFile& in) { return open(MappedFile::open(in), in.path()); }

SafetensorsFile SafetensorsFile::from_bytes(std::vector<std::byte> bytes, std::string label) {
  return open(MappedFile::from_bytes(std::move(bytes)), std::move(label));
}

SafetensorsFile SafetensorsFile::open(std::shared_ptr<const MappedFile> image, std::string label) {
  SafetensorsFile file;
  file.storage_ = std::make_shared<Storage>(Storage{std::move(image)});
  file.label_ = std::move(label);
  file.parse();
  return file;
}

void SafetensorsFile::parse() {
  const std::span<const std::byte> image = storage_->view();
  if (image.size() < 8)
    fail(label_, ": truncated: ", image.size(), " bytes, too short for the 8-byte header length");
  const uint64_t header_len = read_u64_le(image.data());
  if (header_len > kMaxHeaderBytes)
    fail(label_, ": header length ", header_len, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  if (header_len > image.size() - 8)
    fail(label_, ": header length ", header_len, " runs past the end of the file (", image.size() - 8,
         " bytes follow the length)");
  const char* header_begin = reinterpret_cast<const char*>(image.data() + 8);
  // parse_json refuses a name given twice (the format has one entry per tensor) and deep nesting.
  const nlohmann::json header = parse_json(std::string_view(header_begin, header_len), label_ + " (header)");
  if (!header.is_object()) fail(label_, ": header must be a JSON object, got ", header.type_name());
  data_ = image.subspan(8 + header_len);

  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) fail(label_, ": __metadata__ must be an object of strings");
      for (const auto& [key, text] : value.items()) {
        if (!text.is_string())
          fail(label_, ": __metadata__ value for ", quote_for_message(key), " must be a string, got ", describe_json(text));
        metadata_[key] = text.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor " + quote_for_message(name);
    if (!value.is_object()) fail(label_, ": ", where, " must be an object");
    if (!value.contains("dtype") || !value["dtype"].is_string())
      fail(label_, ": ", where, " has no string field 'dtype'");
    if (!value.contains("shape") || !value["shape"].is_array())
      fail(label_, ": ", where, " has no array field 'shape'");
    if (!value.contains("data_offsets") || !value["data_offsets"].is_array() || value["data_offsets"].size() != 2)
      fail(label_, ": ", where, " needs 'data_offsets' as [begin, end]");
    TensorInfo info;
    info.name = name;
    const std::string dtype_text = value["dtype"].get<std::string>();
    const auto dtype = dtype_from_name(dtype_text);
    if (!dtype) fail(label_, ": ", where, " has unknown dtype ", quote_for_message(dtype_text));
    info.dtype = *dtype;
    uint64_t numel = 1;
    bool overflow = false;
    for (const auto& d : value["shape"]) {
      const uint64_t dim = json_u64(d, label_, where + " shape entry");
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) overflow = true;
      if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / dim) overflow = true;
      if (!overflow) numel *= dim;
      info.shape.push_back(static_cast<int64_t>(std::min<uint64_t>(dim, std::numeric_limits<int64_t>::max())));
    }
    info.begin = json_u64(value["data_offsets"][0], label_, where + " data_offsets[0]");
    info.end = json_u64(value["data_offsets"][1], label_, where + " data_offsets[1]");
    if (info.begin > info.end)
      fail(label_, ": ", where, " has data_offsets [", info.begin, ", ", info.end, "] with begin after end");
    if (info.end > data_.size())
      fail(label_, ": ", where, " has data_offsets [", info.begin, ", ", info.end, "] outside the data section of ",
           data_.size(), " bytes");
    const uint64_t elem = static_cast<uint64_t>(dtype_size(info.dtype));
    if (overflow || numel > std::numeric_limits<uint64_t>::max() / elem || numel * elem != info.bytes())
      fail(label_, ": ", where, " of dtype ", dtype_text, " and shape ", shape_to_string(info.shape), " needs ",
           overflow ? std::string("an impossible number of") : std::to_string(numel * elem), " bytes but its offsets span ",
           info.bytes());
    index_[name] = tensors_.size();
    tensors_.push_back(std::move(info));
  }

  std::sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 0; i < tensors_.size(); ++i) {
    index_[tensors_[i].name] = i;
    if (i > 0 && tensors_[i].begin < tensors_[i - 1].end)
      fail(label_, ": tensors ", quote_for_message(tensors_[i - 1].name), " and ", quote_for_message(tensors_[i].name),
           " overlap in the data section");
  }
  check_data_section_covered();
}

// The format forbids holes: the tensors, sorted by offset, tile the data section exactly from its first byte to its
// last. Bytes no tensor indexes would be silently ignored (or be a sign of a damaged or hand-edited file).
void SafetensorsFile::check_data_section_covered() const {
  uint64_t covered = 0;
  for (const TensorInfo& t : tensors_) {
    if (t.begin > covered)
      fail(label_, ": bytes [", covered, ", ", t.begin, ") of the data section belong to no tensor (the next is ",
           quote_for_message(t.name), "); the format forbids holes");
    covered = std::max(covered, t.end);
  }
  if (covered < data_.size())
    fail(label_, ": bytes [", covered, ", ", data_.size(), ") at the end of the data section belong to no tensor",
         tensors_.empty() ? std::string(" (the header lists none)") : "", "; the format forbids holes");
}

bool SafetensorsFile::contains(const std::string& name) const { return index_.count(name) != 0; }

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) fail(label_, ": missing tensor ", quote_for_message(name));
  return tensors_[it->second];
}

std::span<const std::byte> SafetensorsFile::bytes(const std::string& name) const {
  const TensorInfo& t = info(name);
  return data_.subspan(t.begin, t.bytes());
}

Tensor SafetensorsFile::read_f32(const std::string& name) const {
  const TensorInfo& t = info(name);
  const auto raw = bytes(name);
  Tensor out(t.shape);
  const size_t elem = static_cast<size_t>(dtype_size(t.dtype));
  if (t.dtype == DType::kF32) {
    if (!raw.empty()) std::memcpy(out.data(), raw.data(), raw.size());
  } else {
    for (int64_t i = 0; i < out.numel(); ++i) out[i] = element_to_float(t.dtype, raw.data() + static_cast<size_t>(i) * elem);
  }
  return out;
}

Tensor SafetensorsFile::read_f32(const std::string& name, const Shape& expected_shape) const {
  const TensorInfo& t = info(name);
  if (t.shape != expected_shape)
    fail(label_, ": tensor ", quote_for_message(name), " has shape ", shape_to_string(t.shape), ", expected ",
         shape_to_string(expected_shape));
  return read_f32(name);
}

void SafetensorsWriter::add(const std::string& name, const Tensor& tensor) {
  std::vector<std::byte> bytes(static_cast<size_t>(tensor.numel()) * sizeof(float));
  if (!bytes.empty()) std::memcpy(bytes.data(), tensor.data(), bytes.size());
  add_raw(name, DType::kF32, tensor.shape(), std::move(bytes));
}

void SafetensorsWriter::add_raw(const std::string& name, DType dtype, const Shape& shape, std::vector<std::byte> bytes) {
  if (name.empty() || name == "__metadata__")
    fail("safetensors writer: invalid tensor name ", quote_for_message(name));
  if (static_cast<uint64_t>(shape_numel(shape)) * static_cast<uint64_t>(dtype_size(dtype)) != bytes.size())
    fail("safetensors writer: tensor ", quote_for_message(name), " of shape ", shape_to_string(shape), " has ", bytes.size(),
         " bytes of data");
  entries_[name] = Entry{dtype, shape, std::move(bytes)};
}

std::vector<std::byte> SafetensorsWriter::serialize() const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const auto& [name, e] : entries_) {
    header[name] = {{"dtype", dtype_name(e.dtype)},
                    {"shape", e.shape},
                    {"data_offsets", {offset, offset + e.bytes.size()}}};
    offset += e.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  std::vector<std::byte> out(8 + text.size() + offset);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, text.data(), text.size());
  size_t pos = 8 + text.size();
  for (const auto& [name, e] : entries_) {
    if (!e.bytes.empty()) std::memcpy(out.data() + pos, e.bytes.data(), e.bytes.size());
    pos += e.bytes.size();
  }
  return out;
}

void SafetensorsWriter::write(const std::string& path) const { write_file_atomically(path, serialize()); }

}  // namespace hymoe
