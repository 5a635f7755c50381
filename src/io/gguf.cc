// GGUF reader. It trusts nothing in the file: every count is checked against the bytes that remain before
// anything is allocated for it, every length and offset against the mapping before it is used, and all size
// arithmetic is overflow-checked (this file is the gguf fuzz target's subject).
#include "hymoe/gguf.h"

#include <bit>
#include <charconv>
#include <cstring>
#include <limits>

#include "hymoe/error.h"

namespace hymoe {

static_assert(std::endian::native == std::endian::little, "GGUF values are read with memcpy: little-endian hosts only");

namespace {

constexpr uint32_t kValueTypeCount = 13;

// Bytes of one value of a fixed-size type; 0 for STRING and ARRAY.
uint64_t fixed_value_bytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64: return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray: return 0;
  }
  return 0;
}

template <typename T>
T load(std::span<const std::byte> raw) {
  HYMOE_CHECK(raw.size() == sizeof(T), "value of ", raw.size(), " bytes read as ", sizeof(T));
  T v;
  std::memcpy(&v, raw.data(), sizeof(T));
  return v;
}

// a * b, or nullopt on uint64 overflow.
std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

template <typename T>
std::string number_text(T value) {
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, result.ptr);
}

// Strings as they appear in listings: quoted, control characters and quotes escaped, other bytes as stored.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string gguf_value_type_name(uint32_t type) {
  static constexpr std::string_view kNames[kValueTypeCount] = {"UINT8", "INT8",    "UINT16", "INT16",  "UINT32",
                                                               "INT32", "FLOAT32", "BOOL",   "STRING", "ARRAY",
                                                               "UINT64", "INT64",  "FLOAT64"};
  if (type < kValueTypeCount) return std::string(kNames[type]);
  return "type " + std::to_string(type);
}

// --- GgufValue ---

GgufValue GgufValue::element(uint64_t i) const {
  HYMOE_CHECK(type_ == GgufValueType::kArray && i < count_, "element ", i, " of a value with ", count_, " elements");
  if (!elements_.empty()) return elements_[static_cast<size_t>(i)];
  const uint64_t size = fixed_value_bytes(element_type_);
  GgufValue v;
  v.type_ = element_type_;
  v.raw_ = raw_.subspan(static_cast<size_t>(i * size), static_cast<size_t>(size));
  return v;
}

uint64_t GgufValue::as_uint() const {
  switch (type_) {
    case GgufValueType::kUint8:
    case GgufValueType::kBool: return load<uint8_t>(raw_);
    case GgufValueType::kUint16: return load<uint16_t>(raw_);
    case GgufValueType::kUint32: return load<uint32_t>(raw_);
    case GgufValueType::kUint64: return load<uint64_t>(raw_);
    default: HYMOE_CHECK(false, "as_uint on a ", gguf_value_type_name(static_cast<uint32_t>(type_)));
  }
  return 0;
}

int64_t GgufValue::as_int() const {
  switch (type_) {
    case GgufValueType::kInt8: return load<int8_t>(raw_);
    case GgufValueType::kInt16: return load<int16_t>(raw_);
    case GgufValueType::kInt32: return load<int32_t>(raw_);
    case GgufValueType::kInt64: return load<int64_t>(raw_);
    default: HYMOE_CHECK(false, "as_int on a ", gguf_value_type_name(static_cast<uint32_t>(type_)));
  }
  return 0;
}

double GgufValue::as_float() const {
  if (type_ == GgufValueType::kFloat32) return load<float>(raw_);
  HYMOE_CHECK(type_ == GgufValueType::kFloat64, "as_float on a ", gguf_value_type_name(static_cast<uint32_t>(type_)));
  return load<double>(raw_);
}

bool GgufValue::as_bool() const {
  HYMOE_CHECK(type_ == GgufValueType::kBool, "as_bool on a ", gguf_value_type_name(static_cast<uint32_t>(type_)));
  return load<uint8_t>(raw_) != 0;
}

std::string_view GgufValue::as_string() const {
  HYMOE_CHECK(type_ == GgufValueType::kString, "as_string on a ", gguf_value_type_name(static_cast<uint32_t>(type_)));
  return {reinterpret_cast<const char*>(raw_.data()), raw_.size()};
}

std::string GgufValue::to_display(size_t max_elements) const {
  switch (type_) {
    case GgufValueType::kUint8:
    case GgufValueType::kUint16:
    case GgufValueType::kUint32:
    case GgufValueType::kUint64: return std::to_string(as_uint());
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64: return std::to_string(as_int());
    case GgufValueType::kFloat32: return number_text(load<float>(raw_));
    case GgufValueType::kFloat64: return number_text(load<double>(raw_));
    case GgufValueType::kBool: return as_bool() ? "true" : "false";
    case GgufValueType::kString: return quoted(as_string());
    case GgufValueType::kArray: {
      std::string out = "[";
      const uint64_t shown = std::min<uint64_t>(count_, max_elements);
      for (uint64_t i = 0; i < shown; ++i) out += (i ? ", " : "") + element(i).to_display(max_elements);
      if (shown < count_) out += std::string(shown ? ", " : "") + "... (" + std::to_string(count_) + " elements)";
      return out + "]";
    }
  }
  return "";
}

// --- GgufTensorInfo ---

Shape GgufTensorInfo::shape() const {
  Shape shape;
  for (uint32_t i = n_dims; i-- > 0;) shape.push_back(static_cast<int64_t>(ne[i]));
  return shape;
}

std::string GgufTensorInfo::ne_text() const {
  std::string out = "[";
  for (uint32_t d = 0; d < n_dims; ++d) {
    if (d) out += ", ";
    out += std::to_string(ne[d]);
  }
  return out + "]";
}

// --- parsing ---

class GgufParser {
 public:
  GgufParser(GgufFile& file, GgufReadOptions options) : f_(file), options_(options), image_(file.image_) {}

  void parse() {
    header();
    for (uint64_t i = 0; i < n_kv_; ++i) key_value(i);
    alignment();
    for (uint64_t i = 0; i < n_tensors_; ++i) tensor_info(i);
    data_section();
  }

 private:
  const std::string& label() const { return f_.label_; }
  uint64_t remaining() const { return image_.size() - pos_; }

  // `what` says what was being read, for the message.
  std::span<const std::byte> take(uint64_t n, const std::string& what) {
    if (n > remaining())
      fail(label(), ": truncated: ", what, " needs ", n, " bytes at offset ", pos_, " but the file (", image_.size(),
           " bytes) has ", remaining(), " left");
    const auto out = image_.subspan(static_cast<size_t>(pos_), static_cast<size_t>(n));
    pos_ += n;
    return out;
  }
  uint32_t u32(const std::string& what) { return load<uint32_t>(take(4, what)); }
  uint64_t u64(const std::string& what) { return load<uint64_t>(take(8, what)); }

  std::span<const std::byte> string_bytes(const std::string& what, uint64_t max_bytes) {
    const uint64_t length = u64(what + " length");
    if (length > max_bytes)
      fail(label(), ": ", what, " has length ", length, ", more than the limit of ", max_bytes, " bytes");
    return take(length, what);
  }

  void header() {
    if (image_.size() < 4) fail(label(), ": truncated: ", image_.size(), " bytes, too short for the GGUF magic");
    const auto magic = take(4, "magic");
    if (std::memcmp(magic.data(), "GGUF", 4) != 0) {
      static const char kHex[] = "0123456789abcdef";
      std::string got;
      for (const std::byte b : magic) {
        const auto u = static_cast<unsigned>(b);
        got += std::string(got.empty() ? "" : " ") + kHex[u >> 4] + kHex[u & 15];
      }
      fail(label(), ": not a GGUF file: magic is ", got, ", expected 47 47 55 46 (\"GGUF\")");
    }
    const uint32_t version = u32("version");
    if (version == 0 || ((version & 0xffffu) == 0 && (version >> 16) != 0))
      fail(label(), ": GGUF version field reads ", version,
           (version & 0xffffu) == 0 && version != 0 ? " (a big-endian file?): only little-endian files are supported"
                                                     : ": not a valid version");
    if (version == 1) fail(label(), ": GGUF version 1 (32-bit counts) is not supported; versions 2 and 3 are");
    if (version > 3) fail(label(), ": GGUF version ", version, " is newer than the versions hymoe reads (2 and 3)");
    f_.version_ = version;
    n_tensors_ = u64("tensor count");
    n_kv_ = u64("metadata key-value count");
    // The smallest key-value pair: a 1-byte key (8 + 1), a type (4) and a 1-byte value; the smallest tensor info:
    // an empty name (8), n_dims = 0 (4), a type (4) and an offset (8).
    constexpr uint64_t kMinKvBytes = 14, kMinTensorInfoBytes = 24;
    if (n_kv_ > remaining() / kMinKvBytes)
      fail(label(), ": truncated: metadata key-value count ", n_kv_, " cannot fit in the ", remaining(),
           " bytes that follow the header");
    if (n_tensors_ > (remaining() - n_kv_ * kMinKvBytes) / kMinTensorInfoBytes)
      fail(label(), ": truncated: tensor count ", n_tensors_, " cannot fit in the ", remaining(),
           " bytes that follow the header");
    f_.metadata_.reserve(static_cast<size_t>(n_kv_));
    f_.tensors_.reserve(static_cast<size_t>(n_tensors_));
  }

  void key_value(uint64_t i) {
    const std::string what = "metadata key #" + std::to_string(i);
    const auto key_bytes = string_bytes(what, GgufFile::kMaxStringBytes);
    if (key_bytes.empty()) fail(label(), ": ", what, " is empty");
    std::string key(reinterpret_cast<const char*>(key_bytes.data()), key_bytes.size());
    if (f_.key_index_.count(key)) fail(label(), ": duplicate metadata key ", quote_for_message(key));
    const std::string where = "metadata key " + quote_for_message(key);
    const uint32_t type = u32(where + " value type");
    GgufValue value = parse_value(type, where, 0);
    f_.key_index_.emplace(key, f_.metadata_.size());
    f_.metadata_.emplace_back(std::move(key), std::move(value));
  }

  GgufValue parse_value(uint32_t type, const std::string& where, int depth) {
    if (type >= kValueTypeCount) fail(label(), ": ", where, " has unknown value type ", type);
    GgufValue v;
    v.type_ = static_cast<GgufValueType>(type);
    if (v.type_ == GgufValueType::kString) {
      v.raw_ = string_bytes(where + " string", GgufFile::kMaxStringBytes);
    } else if (v.type_ != GgufValueType::kArray) {
      v.raw_ = take(fixed_value_bytes(v.type_), where + " " + gguf_value_type_name(type) + " value");
    } else {
      const uint32_t element_type = u32(where + " array element type");
      if (element_type >= kValueTypeCount) fail(label(), ": ", where, " is an array of unknown value type ", element_type);
      v.element_type_ = static_cast<GgufValueType>(element_type);
      if (v.element_type_ == GgufValueType::kArray) {
        if (!options_.allow_nested_arrays)
          fail(label(), ": ", where, " is an array of arrays, which ggml rejects (and hymoe unless asked to read them)");
        if (depth + 1 >= GgufFile::kMaxArrayDepth)
          fail(label(), ": ", where, " nests arrays deeper than ", GgufFile::kMaxArrayDepth, " levels");
      }
      v.count_ = u64(where + " array length");
      const uint64_t fixed = fixed_value_bytes(v.element_type_);
      if (fixed != 0) {
        if (v.count_ > remaining() / fixed)
          fail(label(), ": truncated: ", where, " declares ", v.count_, " ", gguf_value_type_name(element_type),
               " elements but only ", remaining(), " bytes remain");
        v.raw_ = take(v.count_ * fixed, where + " array");
      } else {
        // Each string takes at least its 8-byte length, each array its 12-byte header: the count is checked
        // against that before any element is allocated.
        const uint64_t min_bytes = v.element_type_ == GgufValueType::kString ? 8 : 12;
        if (v.count_ > remaining() / min_bytes)
          fail(label(), ": truncated: ", where, " declares ", v.count_, " ", gguf_value_type_name(element_type),
               " elements but only ", remaining(), " bytes remain");
        v.elements_.reserve(static_cast<size_t>(v.count_));
        for (uint64_t j = 0; j < v.count_; ++j)
          v.elements_.push_back(parse_value(element_type, where + " element " + std::to_string(j), depth + 1));
      }
    }
    return v;
  }

  void alignment() {
    const GgufValue* v = f_.find("general.alignment");
    if (!v) return;
    if (v->type() != GgufValueType::kUint32)
      fail(label(), ": metadata key 'general.alignment' has type ", gguf_value_type_name(static_cast<uint32_t>(v->type())),
           ", expected UINT32");
    const uint64_t a = v->as_uint();
    if (a == 0 || (a & (a - 1)) != 0)
      fail(label(), ": metadata key 'general.alignment' is ", a, ", expected a power of two");
    f_.alignment_ = a;
  }

  void tensor_info(uint64_t i) {
    const std::string what = "tensor info #" + std::to_string(i);
    const auto name_bytes = string_bytes(what + " name", GgufFile::kMaxNameBytes);
    GgufTensorInfo t;
    t.name.assign(reinterpret_cast<const char*>(name_bytes.data()), name_bytes.size());
    if (f_.index_.count(t.name)) fail(label(), ": duplicate tensor name ", quote_for_message(t.name));
    const std::string where = "tensor " + quote_for_message(t.name);
    t.n_dims = u32(where + " n_dims");
    if (t.n_dims > GgufFile::kMaxDims)
      fail(label(), ": ", where, " has ", t.n_dims, " dimensions, more than ggml's ", GgufFile::kMaxDims);
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      t.ne[d] = u64(where + " ne[" + std::to_string(d) + "]");
      if (t.ne[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(label(), ": ", where, " has a negative dimension ne[", d, "] = ", static_cast<int64_t>(t.ne[d]));
    }
    // The element count, and (for a tensor with ne[0] = 0) the row count, must fit int64.
    uint64_t numel = 1, rows = 1;
    for (uint32_t d = 0; d < GgufFile::kMaxDims; ++d) {
      const auto product = checked_mul(numel, t.ne[d]);
      const auto row_product = d == 0 ? std::optional<uint64_t>(1) : checked_mul(rows, t.ne[d]);
      constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      if (!product || *product > kMax || !row_product || *row_product > kMax)
        fail(label(), ": ", where, " has shape ne = ", t.ne_text(), " whose element count overflows int64");
      numel = *product;
      rows = *row_product;
    }
    t.type = u32(where + " type");
    const GgmlTypeTraits* traits = ggml_type_traits(t.type);
    if (!traits) fail(label(), ": ", where, " has unknown or unsupported ggml type id ", t.type);
    if (t.ne[0] % traits->block_values != 0)
      fail(label(), ": ", where, " of type ", traits->name, " has ne[0] = ", t.ne[0],
           ", not a multiple of the type's block of ", traits->block_values, " values");
    t.offset = u64(where + " data offset");
    const auto row_bytes = checked_mul(t.ne[0] / traits->block_values, traits->block_bytes);
    const auto nbytes = row_bytes ? checked_mul(*row_bytes, rows) : std::nullopt;
    if (!nbytes) fail(label(), ": ", where, " of type ", traits->name, " and shape ne = ", t.ne_text(), " has a byte size that overflows");
    t.row_bytes = *row_bytes;
    t.nbytes = *nbytes;
    f_.index_.emplace(t.name, f_.tensors_.size());
    f_.tensors_.push_back(std::move(t));
  }

  void data_section() {
    const uint64_t a = f_.alignment_;
    // pos_ <= file size < 2^63, so rounding up cannot wrap.
    f_.data_offset_ = (pos_ + a - 1) / a * a;
    uint64_t expected = 0;  // ggml stores tensors in info order, each padded to the alignment
    const GgufTensorInfo* previous = nullptr;
    for (const GgufTensorInfo& t : f_.tensors_) {
      const std::string where = "tensor " + quote_for_message(t.name);
      if (t.offset % a != 0) fail(label(), ": ", where, " has data offset ", t.offset, ", not a multiple of the alignment ", a);
      if (t.offset != expected) {
        if (t.offset < expected)
          fail(label(), ": ", where, " at data offset ", t.offset, " overlaps tensor ", quote_for_message(previous->name),
               ", which ends at ", expected, " (with padding)");
        fail(label(), ": ", where, " has data offset ", t.offset, ", expected ", expected,
             " (tensors are stored in order, each padded to the alignment ", a, ")");
      }
      uint64_t end = 0, file_end = 0;
      if (__builtin_add_overflow(t.offset, t.nbytes, &end) || __builtin_add_overflow(f_.data_offset_, end, &file_end))
        fail(label(), ": ", where, " data at offset ", t.offset, " of ", t.nbytes, " bytes wraps around 64 bits");
      if (file_end > image_.size())
        fail(label(), ": truncated: ", where, " data [", f_.data_offset_ + t.offset, ", ", file_end,
             ") runs past the end of the file (", image_.size(), " bytes)");
      const uint64_t padded = (t.nbytes + a - 1) / a * a;  // nbytes <= file size: no wrap
      expected += padded;
      previous = &t;
    }
  }

  GgufFile& f_;
  GgufReadOptions options_;
  std::span<const std::byte> image_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
};

// --- GgufFile ---

GgufFile GgufFile::open(const std::string& path, GgufReadOptions options) {
  return open(MappedFile::open(path), path, options);
}

GgufFile GgufFile::from_bytes(std::vector<std::byte> bytes, std::string label, GgufReadOptions options) {
  return open(MappedFile::from_bytes(std::move(bytes)), std::move(label), options);
}

GgufFile GgufFile::open(std::shared_ptr<const MappedFile> image, std::string label, GgufReadOptions options) {
  GgufFile file;
  file.storage_ = std::move(image);
  file.image_ = file.storage_->view();
  file.label_ = std::move(label);
  GgufParser(file, options).parse();
  return file;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

namespace {
const GgufValue* typed(const GgufFile& file, std::string_view key, GgufValueType type) {
  const GgufValue* v = file.find(key);
  if (v && v->type() != type)
    fail(file.label(), ": metadata key ", quote_for_message(key), " has type ", gguf_value_type_name(static_cast<uint32_t>(v->type())),
         ", expected ", gguf_value_type_name(static_cast<uint32_t>(type)));
  return v;
}
}  // namespace

std::optional<uint32_t> GgufFile::get_u32(std::string_view key) const {
  const GgufValue* v = typed(*this, key, GgufValueType::kUint32);
  return v ? std::optional<uint32_t>(static_cast<uint32_t>(v->as_uint())) : std::nullopt;
}

std::optional<float> GgufFile::get_f32(std::string_view key) const {
  const GgufValue* v = typed(*this, key, GgufValueType::kFloat32);
  return v ? std::optional<float>(static_cast<float>(v->as_float())) : std::nullopt;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = typed(*this, key, GgufValueType::kBool);
  return v ? std::optional<bool>(v->as_bool()) : std::nullopt;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = typed(*this, key, GgufValueType::kString);
  return v ? std::optional<std::string>(std::string(v->as_string())) : std::nullopt;
}

std::optional<float> GgufFile::get_f32_of_block(std::string_view key, uint32_t block, uint32_t block_count) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type() == GgufValueType::kFloat32) return static_cast<float>(v->as_float());
  if (v->type() != GgufValueType::kArray || v->element_type() != GgufValueType::kFloat32)
    fail(label_, ": metadata key ", quote_for_message(key), " has type ", gguf_value_type_name(static_cast<uint32_t>(v->type())),
         v->type() == GgufValueType::kArray
             ? " of " + gguf_value_type_name(static_cast<uint32_t>(v->element_type()))
             : std::string(),
         ", expected FLOAT32 or an ARRAY of FLOAT32 with one entry per block");
  if (v->size() != block_count)
    fail(label_, ": metadata key ", quote_for_message(key), " has ", v->size(), " entries, expected one per block (",
         block_count, ")");
  if (block >= block_count) fail(label_, ": metadata key ", quote_for_message(key), " has no entry for block ", block);
  return static_cast<float>(v->element(block).as_float());
}

uint32_t GgufFile::require_u32(std::string_view key) const {
  const auto v = get_u32(key);
  if (!v) fail(label_, ": missing metadata key ", quote_for_message(key));
  return *v;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(std::string_view name) const {
  const GgufTensorInfo* t = find_tensor(name);
  if (!t) fail(label_, ": missing tensor ", quote_for_message(name));
  return *t;
}

std::span<const std::byte> GgufFile::bytes(const GgufTensorInfo& info) const {
  return image_.subspan(static_cast<size_t>(data_offset_ + info.offset), static_cast<size_t>(info.nbytes));
}

}  // namespace hymoe
