#include "runtime/training/pickle_reader.h"

#include <ATen/Functions.h>
#include <ATen/core/Dict.h>
#include <ATen/core/List.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>

#include "runtime/training/pickle_check.h"

namespace ringtorch {
namespace {

// What calling a GLOBAL does; kNone for every other item.
enum class Callable : uint8_t { kNone, kOrderedDict, kRebuildTensor, kRebuildParameter, kRestoreTypeTag, kStorageType };

struct Item {
  c10::IValue value;  // a GLOBAL's is its "module.name"
  Callable callable = Callable::kNone;
};

constexpr size_t kMaxDepth = 100;  // an IValue's destructor recurses through what it holds
constexpr int64_t kMaxDims = 64;

// torch.<Name>Storage, the storage classes torch.save names in a tensor's persistent id.
bool storage_dtype(const std::string& global, at::ScalarType* dtype) {
  static const std::map<std::string, at::ScalarType> kStorages = {
      {"torch.FloatStorage", at::kFloat},
      {"torch.DoubleStorage", at::kDouble},
      {"torch.HalfStorage", at::kHalf},
      {"torch.BFloat16Storage", at::kBFloat16},
      {"torch.LongStorage", at::kLong},
      {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort},
      {"torch.CharStorage", at::kChar},
      {"torch.ByteStorage", at::kByte},
      {"torch.BoolStorage", at::kBool},
      {"torch.ComplexFloatStorage", at::kComplexFloat},
      {"torch.ComplexDoubleStorage", at::kComplexDouble},
  };
  const auto found = kStorages.find(global);
  if (found == kStorages.end()) return false;
  *dtype = found->second;
  return true;
}

class Reader {
 public:
  Reader(const char* data, size_t size, const StorageLoader& load_storage, const std::string& path)
      : data_(data), size_(size), load_storage_(load_storage), path_(path) {}

  c10::IValue run() {
    while (at_ < size_) {
      start_ = at_;
      const auto code = static_cast<unsigned char>(data_[at_++]);
      if (code == '.') {  // STOP: what follows is not read
        Item result = pop();
        if (result.callable != Callable::kNone)
          unsupported(str_cat("a bare global (", result.value.toStringRef(), ")"));
        return result.value;
      }
      step(code);
    }
    start_ = size_;
    damaged("it ends before its STOP opcode");
  }

 private:
  [[noreturn]] void damaged(const std::string& what) const {
    throw IoError(str_cat("checkpoint ", path_, ": its pickle is damaged at byte ", start_, ": ", what));
  }
  [[noreturn]] void unsupported(const std::string& what) const {
    throw IoError(str_cat("checkpoint ", path_, ": its pickle holds ", what, " at byte ", start_,
                          ", which no checkpoint holds (read are dicts, lists, tuples, numbers, strings and "
                          "tensors, as torch.load(weights_only=True) reads)"));
  }

  // --- the bytes ---
  const char* take(uint64_t n) {
    if (n > size_ - at_) damaged(str_cat("it claims ", n, " bytes, ", size_ - at_, " are left"));
    const char* p = data_ + at_;
    at_ += static_cast<size_t>(n);
    return p;
  }
  uint64_t unsigned_le(int bytes) {
    const char* p = take(static_cast<uint64_t>(bytes));
    uint64_t value = 0;
    for (int i = bytes - 1; i >= 0; --i) value = value << 8 | static_cast<unsigned char>(p[i]);
    return value;
  }
  std::string line() {
    const void* newline = std::memchr(data_ + at_, '\n', size_ - at_);
    if (!newline) damaged("its argument has no end of line");
    const size_t end = static_cast<size_t>(static_cast<const char*>(newline) - data_);
    std::string text(data_ + at_, end - at_);
    at_ = end + 1;
    return text;
  }
  std::string counted_string(int length_bytes) {
    const uint64_t length = unsigned_le(length_bytes);
    const char* p = take(length);
    return std::string(p, static_cast<size_t>(length));
  }
  int64_t decimal(const std::string& text) {
    errno = 0;
    char* end = nullptr;
    const long long value = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno == ERANGE) damaged(str_cat("'", text.substr(0, 40), "' is no integer"));
    return value;
  }
  // LONG1 / LONG4: little-endian two's complement of `n` bytes.
  int64_t long_integer(uint64_t n) {
    if (n > 8) unsupported(str_cat("an integer of ", n, " bytes"));
    const char* p = take(n);
    uint64_t value = 0;
    for (uint64_t i = n; i-- > 0;) value = value << 8 | static_cast<unsigned char>(p[i]);
    if (n > 0 && n < 8 && (static_cast<unsigned char>(p[n - 1]) & 0x80)) value |= ~uint64_t{0} << (8 * n);
    return static_cast<int64_t>(value);
  }

  // --- the stack ---
  size_t above_mark() const { return stack_.size() - (marks_.empty() ? 0 : marks_.back()); }
  Item pop() {
    if (above_mark() == 0) damaged("it takes an item the stack does not hold");
    Item item = std::move(stack_.back());
    stack_.pop_back();
    return item;
  }
  c10::IValue pop_value() {
    Item item = pop();
    return std::move(item.value);
  }
  std::vector<Item> pop_to_mark() {
    if (marks_.empty()) damaged("it needs a MARK and there is none");
    std::vector<Item> items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back())),
                            std::make_move_iterator(stack_.end()));
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  void push(c10::IValue value) { stack_.push_back(Item{std::move(value)}); }
  Item& top() {
    if (above_mark() == 0) damaged("it takes an item the stack does not hold");
    return stack_.back();
  }

  // --- containers: nesting depth, and no change after being placed in another ---
  static bool is_container(const c10::IValue& v) { return v.isGenericDict() || v.isList() || v.isTuple(); }
  size_t depth_of(const c10::IValue& v) const {
    if (!is_container(v)) return 0;
    const auto found = containers_.find(v.internalToPointer());
    return found == containers_.end() ? 1 : found->second.depth;
  }
  // The record of a container, made on first use; it keeps the container alive until the end,
  // so that a container freed (popped) and another made at its address cannot inherit it.
  struct Container {
    size_t depth = 1;
    bool placed = false;  // in another container: no longer changed
    c10::IValue kept;
  };
  Container& record_of(const c10::IValue& v) {
    Container& c = containers_[v.internalToPointer()];
    if (c.kept.isNone()) c.kept = v;
    return c;
  }
  // Records that `child` is placed in `parent` (whose depth grows to fit it).
  // A cycle needs the parent inside the child: then the parent was placed, and is not changed
  // (check_changeable), unless the child is the parent itself.
  void place(const c10::IValue& parent, const c10::IValue& child) {
    if (!is_container(child)) return;
    if (child.internalToPointer() == parent.internalToPointer()) {
      damaged("it places a container in itself (a recursive structure)");
    }
    const size_t depth = depth_of(child) + 1;
    if (depth > kMaxDepth) unsupported(str_cat("containers nested more than ", kMaxDepth, " deep"));
    Container& recorded = record_of(parent);
    recorded.depth = std::max(recorded.depth, depth);
    record_of(child).placed = true;
  }
  void check_changeable(const c10::IValue& container) const {
    const auto found = containers_.find(container.internalToPointer());
    if (found != containers_.end() && found->second.placed) {
      damaged("it changes a container already placed in another (a recursive structure)");
    }
  }
  c10::IValue tuple_of(std::vector<Item> items) {
    std::vector<c10::IValue> values;
    values.reserve(items.size());
    for (auto& item : items) values.push_back(std::move(item.value));
    c10::IValue tuple(c10::ivalue::Tuple::create(std::move(values)));
    for (const auto& element : tuple.toTupleRef().elements()) place(tuple, element);
    return tuple;
  }
  void set_items(c10::IValue& dict_value, std::vector<Item>& items) {
    if (!dict_value.isGenericDict()) unsupported(str_cat("items set on a ", dict_value.tagKind(), ", not a dict"));
    if (items.size() % 2 != 0) damaged(str_cat("it pairs keys with values and there are ", items.size(), " items"));
    check_changeable(dict_value);
    auto dict = dict_value.toGenericDict();
    for (size_t i = 0; i < items.size(); i += 2) {
      // Strings and small integers, the keys of state_dicts and optimizer states. Not floats
      // nor large integers: c10::Dict doubles its table whenever a key probes too far, and NaN
      // keys (one hash, never equal) or crafted integers made a few hundred bytes of pickle ask
      // for gigabytes.
      const c10::IValue& key = items[i].value;
      if (!(key.isString() || (key.isInt() && key.toInt() >= 0 && key.toInt() < (int64_t{1} << 31)))) {
        unsupported(key.isInt() ? str_cat("the dict key ", key.toInt(), " (integer keys are 0 to 2^31-1)")
                                : str_cat("a dict key of type ", key.tagKind()));
      }
      place(dict_value, items[i + 1].value);
      dict.insert_or_assign(key, items[i + 1].value);
    }
  }
  void append_items(c10::IValue& list_value, std::vector<Item>& items) {
    if (!list_value.isList()) unsupported(str_cat("items appended to a ", list_value.tagKind(), ", not a list"));
    check_changeable(list_value);
    auto list = list_value.toList();
    for (auto& item : items) {
      place(list_value, item.value);
      list.push_back(item.value);
    }
  }

  // --- globals and what calling them makes ---
  Item global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    Item item{c10::IValue(full)};
    at::ScalarType dtype;
    if (full == "collections.OrderedDict") {
      item.callable = Callable::kOrderedDict;
    } else if (full == "torch._utils._rebuild_tensor_v2") {
      item.callable = Callable::kRebuildTensor;
    } else if (full == "torch._utils._rebuild_parameter" || full == "torch._utils._rebuild_parameter_with_state") {
      item.callable = Callable::kRebuildParameter;
    } else if (full == "torch.jit._pickle.restore_type_tag") {
      item.callable = Callable::kRestoreTypeTag;
    } else if (storage_dtype(full, &dtype)) {
      item.callable = Callable::kStorageType;
    } else {
      unsupported(str_cat("the global ", full.substr(0, 120)));
    }
    return item;
  }
  static c10::IValue new_dict() { return c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get()); }

  int64_t int_argument(const c10::IValue& v, const char* what) {
    if (!v.isInt()) damaged(str_cat("a tensor's ", what, " is not an integer"));
    return v.toInt();
  }
  std::vector<int64_t> shape_argument(const c10::IValue& v, const char* what) {
    if (!v.isTuple()) damaged(str_cat("a tensor's ", what, " is not a tuple"));
    const auto& elements = v.toTupleRef().elements();
    if (static_cast<int64_t>(elements.size()) > kMaxDims)
      unsupported(str_cat("a tensor of ", elements.size(), " dimensions"));
    std::vector<int64_t> numbers;
    for (const auto& e : elements) {
      numbers.push_back(int_argument(e, what));
      if (numbers.back() < 0) damaged(str_cat("a tensor's ", what, " holds ", numbers.back()));
    }
    return numbers;
  }
  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  c10::IValue rebuild_tensor(const std::vector<c10::IValue>& args) {
    if (args.size() < 4 || args.size() > 7 || !args[0].isTensor()) {
      damaged("_rebuild_tensor_v2 is called without (storage, offset, size, stride, ...)");
    }
    const at::Tensor& flat = args[0].toTensor();  // the whole storage (persistent_id)
    if (!storage_tensors_.count(flat.unsafeGetTensorImpl())) damaged("_rebuild_tensor_v2 is given no storage");
    // torch 2.x's 7th argument: the conjugate and negative bits Python sets on the tensor.
    if (args.size() == 7 && !args[6].isNone() && !(args[6].isGenericDict() && args[6].toGenericDict().empty())) {
      unsupported("a tensor with metadata (conjugate or negative bits)");
    }
    const int64_t offset = int_argument(args[1], "storage offset");
    const std::vector<int64_t> sizes = shape_argument(args[2], "size");
    const std::vector<int64_t> strides = shape_argument(args[3], "stride");
    if (offset < 0) damaged(str_cat("a tensor's storage offset is ", offset));
    if (sizes.size() != strides.size()) damaged("a tensor's size and stride differ in length");
    int64_t numel = 1;
    for (int64_t size : sizes) {
      if (__builtin_mul_overflow(numel, size, &numel)) damaged("a tensor's sizes overflow");
    }
    // Within the storage before LibTorch sees the numbers (set_ would try to grow the storage).
    uint64_t last = static_cast<uint64_t>(offset), step = 0;
    bool empty = false;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] == 0) empty = true;
      if (sizes[d] > 0 &&
          (__builtin_mul_overflow(static_cast<uint64_t>(sizes[d] - 1), static_cast<uint64_t>(strides[d]), &step) ||
           __builtin_add_overflow(last, step, &last))) {
        damaged("a tensor's sizes and strides overflow");
      }
    }
    if (!empty && last >= static_cast<uint64_t>(flat.numel())) {
      damaged(str_cat("a tensor reaches element ", last, " of a storage of ", flat.numel()));
    }
    at::Tensor tensor = at::empty({0}, flat.options());
    tensor.set_(flat.storage(), empty ? 0 : offset, sizes, strides);
    check_tensor_within_storage(tensor, str_cat("checkpoint ", path_, ": a tensor"));
    return tensor;
  }
  c10::IValue call(const Item& callable, const c10::IValue& arguments) {
    if (!arguments.isTuple()) damaged("a call's arguments are not a tuple");
    const auto& args = arguments.toTupleRef().elements();
    switch (callable.callable) {
      case Callable::kOrderedDict:
        if (!args.empty()) unsupported("an OrderedDict made from arguments");
        return new_dict();
      case Callable::kRebuildTensor:
        return rebuild_tensor(std::vector<c10::IValue>(args.begin(), args.end()));
      case Callable::kRebuildParameter:
        if (args.empty() || !args[0].isTensor()) damaged("_rebuild_parameter is called without a tensor");
        return args[0];
      case Callable::kRestoreTypeTag:  // (value, "Dict[str, Tensor]"): the value, its type as read
        if (args.size() != 2 || !args[1].isString()) damaged("restore_type_tag is called without (value, type)");
        return args[0];
      case Callable::kStorageType:
        unsupported("a storage made by calling its class");
      case Callable::kNone:
        break;
    }
    damaged(str_cat("it calls a ", callable.value.tagKind(), ", not a global"));
  }
  // BINPERSID: ('storage', torch.<Name>Storage, key, location, numel), torch.save's reference to
  // the archive's record data/<key>. Every reference to a key gets the same storage.
  c10::IValue persistent(const c10::IValue& id) {
    if (!id.isTuple() || id.toTupleRef().elements().size() != 5) damaged("a persistent id is not a storage's");
    const auto& elements = id.toTupleRef().elements();
    const std::vector<c10::IValue> e(elements.begin(), elements.end());
    at::ScalarType dtype;
    if (!e[0].isString() || e[0].toStringRef() != "storage" || !e[1].isString() ||
        !storage_dtype(e[1].toStringRef(), &dtype) || !e[2].isString() || !e[4].isInt() || e[4].toInt() < 0) {
      damaged("a persistent id is not ('storage', torch.<Type>Storage, key, location, size)");
    }
    const std::string& key = e[2].toStringRef();
    auto found = storages_.find(key);
    if (found == storages_.end()) {
      found = storages_.emplace(key, load_storage_(key, dtype)).first;
      storage_tensors_.insert(found->second.unsafeGetTensorImpl());
    }
    const at::Tensor& flat = found->second;
    if (flat.scalar_type() != dtype) damaged(str_cat("storage ", key, " is named with two types"));
    if (e[4].toInt() > flat.numel()) {
      damaged(str_cat("storage ", key, " claims ", e[4].toInt(), " elements, its record holds ", flat.numel()));
    }
    return flat;
  }

  // --- memo ---
  void memo_put(uint64_t index) { memo_[index] = top(); }
  void memo_get(uint64_t index) {
    const auto found = memo_.find(index);
    if (found == memo_.end()) damaged(str_cat("it names memo entry ", index, ", which was never stored"));
    stack_.push_back(found->second);
  }

  void step(unsigned char code) {
    switch (code) {
      case 0x80: {  // PROTO
        const uint64_t version = unsigned_le(1);
        if (version < 2 || version > 5) unsupported(str_cat("pickle protocol ", version));
        return;
      }
      case 0x95:
        take(8);
        return;  // FRAME: a hint for buffering
      case '(':
        marks_.push_back(stack_.size());
        return;
      case '0':  // POP (Python's pops a MARK when nothing lies above it)
        if (above_mark() == 0 && !marks_.empty()) {
          marks_.pop_back();
        } else {
          pop();
        }
        return;
      case '1':
        pop_to_mark();
        return;    // POP_MARK
      case '2': {  // DUP
        Item copy = top();
        stack_.push_back(std::move(copy));
        return;
      }
      // Constants and numbers.
      case 'N':
        push(c10::IValue());
        return;
      case 0x88:
        push(true);
        return;
      case 0x89:
        push(false);
        return;
      case 'J':
        push(static_cast<int64_t>(static_cast<int32_t>(unsigned_le(4))));
        return;
      case 'K':
        push(static_cast<int64_t>(unsigned_le(1)));
        return;
      case 'M':
        push(static_cast<int64_t>(unsigned_le(2)));
        return;
      case 0x8a:
        push(long_integer(unsigned_le(1)));
        return;  // LONG1
      case 0x8b:
        push(long_integer(unsigned_le(4)));
        return;    // LONG4
      case 'I': {  // INT: protocol 0's, also its bools
        const std::string text = line();
        if (text == "00" || text == "01") {
          push(text == "01");
        } else {
          push(decimal(text));
        }
        return;
      }
      case 'L': {  // LONG: decimal with a trailing L
        std::string text = line();
        if (!text.empty() && text.back() == 'L') text.pop_back();
        push(decimal(text));
        return;
      }
      case 'F': {  // FLOAT: decimal text
        const std::string text = line();
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0') damaged(str_cat("'", text.substr(0, 40), "' is no number"));
        push(value);
        return;
      }
      case 'G': {  // BINFLOAT: big-endian IEEE 754
        const char* p = take(8);
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = bits << 8 | static_cast<unsigned char>(p[i]);
        double value;
        std::memcpy(&value, &bits, sizeof(value));
        push(value);
        return;
      }
      // Strings; bytes become strings (an IValue has no bytes).
      case 'X':
      case 'T':
      case 'B':
        push(counted_string(4));
        return;
      case 0x8c:
      case 'U':
      case 'C':
        push(counted_string(1));
        return;
      case 0x8d:
      case 0x8e:
        push(counted_string(8));
        return;
      // Containers.
      case '}':
        push(new_dict());
        return;
      case ']':
        push(c10::impl::GenericList(c10::AnyType::get()));
        return;
      case ')':
        push(tuple_of({}));
        return;
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
        std::vector<Item> items(code - 0x84);
        for (size_t i = items.size(); i-- > 0;) items[i] = pop();
        push(tuple_of(std::move(items)));
        return;
      }
      case 't':
        push(tuple_of(pop_to_mark()));
        return;
      case 'l': {
        std::vector<Item> items = pop_to_mark();
        c10::IValue list = c10::impl::GenericList(c10::AnyType::get());
        append_items(list, items);
        push(std::move(list));
        return;
      }
      case 'd': {
        std::vector<Item> items = pop_to_mark();
        c10::IValue dict = new_dict();
        set_items(dict, items);
        push(std::move(dict));
        return;
      }
      case 's': {  // SETITEM: dict, key, value
        std::vector<Item> items(2);
        items[1] = pop();
        items[0] = pop();
        set_items(top().value, items);
        return;
      }
      case 'u': {  // SETITEMS: dict, MARK, key, value, ...
        std::vector<Item> items = pop_to_mark();
        set_items(top().value, items);
        return;
      }
      case 'a': {  // APPEND: list, item
        std::vector<Item> items(1);
        items[0] = pop();
        append_items(top().value, items);
        return;
      }
      case 'e': {  // APPENDS: list, MARK, items
        std::vector<Item> items = pop_to_mark();
        append_items(top().value, items);
        return;
      }
      // Memo.
      case 'p':
        memo_put(static_cast<uint64_t>(decimal(line())));
        return;
      case 'q':
        memo_put(unsigned_le(1));
        return;
      case 'r':
        memo_put(unsigned_le(4));
        return;
      case 0x94:
        memo_put(memo_.size());
        return;  // MEMOIZE
      case 'g':
        memo_get(static_cast<uint64_t>(decimal(line())));
        return;
      case 'h':
        memo_get(unsigned_le(1));
        return;
      case 'j':
        memo_get(unsigned_le(4));
        return;
      // Globals, calls, persistent ids.
      case 'c': {
        const std::string module = line();
        const std::string name = line();
        stack_.push_back(global(module, name));
        return;
      }
      case 0x93: {  // STACK_GLOBAL: module, name
        const c10::IValue name = pop_value(), module = pop_value();
        if (!module.isString() || !name.isString()) damaged("STACK_GLOBAL's module and name are not strings");
        stack_.push_back(global(module.toStringRef(), name.toStringRef()));
        return;
      }
      case 'R': {  // REDUCE: callable, arguments
        const c10::IValue arguments = pop_value();
        const Item callable = pop();
        push(call(callable, arguments));
        return;
      }
      case 0x81: {  // NEWOBJ: class, arguments (an OrderedDict at protocol 2 and above)
        const c10::IValue arguments = pop_value();
        const Item cls = pop();
        if (cls.callable != Callable::kOrderedDict) unsupported("an object made by NEWOBJ");
        push(call(cls, arguments));
        return;
      }
      case 'b': {  // BUILD: object, state. A state_dict's OrderedDict carries _metadata: ignored.
        const c10::IValue state = pop_value();
        if (!top().value.isGenericDict() || !(state.isGenericDict() || state.isNone())) {
          unsupported(str_cat("an object's state set on a ", top().value.tagKind()));
        }
        return;
      }
      case 'Q':
        push(persistent(pop_value()));
        return;  // BINPERSID
      case 'P':
        unsupported("a text persistent id (protocol 0)");
      case 'S':
      case 'V':
        unsupported("a protocol-0 string");
      case 0x8f:
      case 0x90:
      case 0x91:
        unsupported("a set");
      case 'i':
      case 'o':
      case 0x92:
        unsupported("a class instance");
      case 0x82:
      case 0x83:
      case 0x84:
        unsupported("an extension code");
      case 0x96:
      case 0x97:
      case 0x98:
        unsupported("a bytearray or an out-of-band buffer");
      default:
        damaged(
            str_cat("byte 0x", "0123456789abcdef"[code >> 4], "0123456789abcdef"[code & 15], " is no pickle opcode"));
    }
  }

  const char* data_;
  size_t size_;
  const StorageLoader& load_storage_;
  const std::string& path_;
  size_t at_ = 0;
  size_t start_ = 0;  // the current opcode's offset, for messages
  std::vector<Item> stack_;
  std::vector<size_t> marks_;  // the stack's size at each MARK
  std::unordered_map<uint64_t, Item> memo_;
  std::unordered_map<std::string, at::Tensor> storages_;
  std::unordered_map<const void*, Container> containers_;  // those placed in another or holding one
  std::unordered_set<const void*> storage_tensors_;        // the flat tensors persistent ids gave
};

}  // namespace

c10::IValue read_pickle(const char* data, size_t size, const StorageLoader& load_storage, const std::string& path) {
  return Reader(data, size, load_storage, path).run();
}

}  // namespace ringtorch
