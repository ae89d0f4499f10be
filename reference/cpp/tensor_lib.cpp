// tensor-lib (C++ reference): float64 values in one flat storage, read through a shape,
// strides (in elements) and an offset, as torch.Tensor does; broadcasting, reductions and
// matmul with torch's rules; reverse-mode autograd over a graph of the operations.
// `kata show tensor-lib` has the statement.
//
// Levels:
//   1. Tensor(data), shape, strides, tolist, transpose, permute, x[key], x[key] = v, reshape,
//      is_contiguous, contiguous: views share the storage; reshape copies only when it must.
//   2. add / sub / mul / div / neg / exp / log with broadcasting, sum, max, matmul, and the
//      operators + - * / @ and unary - (the bindings turn Python numbers into 0-d tensors).
//   3. requires_grad, backward(gradient), grad, no_grad: gradients equal to torch.autograd's.
//
// Layout: element (i0, ..., ik) lives at (*storage_)[offset_ + i0*strides_[0] + ... + ik*strides_[k]].
// A view (transpose, permute, indexing, a reshape the layout allows) is a new Tensor over the
// same std::shared_ptr storage, so a write through one is seen through the other.
//
// Autograd: an operation whose input requires grad records its inputs (parents_) and a
// function from the output's gradient to each input's (backward_fn_). backward() orders the
// graph once (a reverse topological order, so each node runs once, with the sum of the
// gradients of all its uses) and accumulates into the grad of the leaves.
//
// Errors, as Python sees them:
//   ValueError          <- throw std::invalid_argument(msg)
//   IndexError          <- throw std::out_of_range(msg)
//   RuntimeError        <- throw std::runtime_error(msg)      (backward's misuse)
//   KeyError            <- throw KeyError(msg)                (not used by this kata)
//   NotImplementedError <- throw NotImplemented(msg)
//
// References: PyTorch's TensorImpl (sizes, strides, storage_offset); `computeStride` in
// ATen's TensorUtils.cpp (when a view can reshape); Karpathy's micrograd (the tape).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

struct KeyError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct NotImplemented : std::logic_error {
    using std::logic_error::logic_error;
};

using Shape = std::vector<int64_t>;  // sizes or strides, one per dim

class Tensor;
using TensorPtr = std::shared_ptr<Tensor>;

// Tensor(data): a number (is_number), or a list whose items are Nested again ([] has none).
// tolist() returns the same structure.
struct Nested {
    bool is_number = false;
    double number = 0.0;
    std::vector<Nested> items;
};

// One entry of x[key]: an int, or a Python slice start:stop:step (an absent part is nullopt).
struct Slice {
    std::optional<int64_t> start, stop, step;
};
using Index = std::variant<int64_t, Slice>;

// ------------------------------------------------------------------ grad mode (level 3)

// Whether operations record a graph: one flag for the module, as the Python reference's.
inline bool grad_enabled = true;

// Grad mode off for the guard's lifetime; the previous mode comes back on destruction, also
// when an exception unwinds through it.
class NoGradGuard {
public:
    NoGradGuard() : previous_(grad_enabled) { grad_enabled = false; }
    ~NoGradGuard() { grad_enabled = previous_; }
    NoGradGuard(const NoGradGuard&) = delete;
    NoGradGuard& operator=(const NoGradGuard&) = delete;

private:
    bool previous_;
};

// `with tensor_lib.no_grad():` calls enter() on the way in and exit() on the way out (also
// when the body raised); each block is its own object, so blocks nest.
class NoGrad {
public:
    void enter() { guard_.emplace(); }
    void exit() { guard_.reset(); }

private:
    std::optional<NoGradGuard> guard_;
};

// ------------------------------------------------------------------ layout helpers

namespace detail {

int64_t numel(const Shape& shape) {
    return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

std::string show(const Shape& shape) {
    std::string out = "(";
    for (size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
    return out + (shape.size() == 1 ? ",)" : ")");
}

// Row-major strides, in elements; a size 0 counts as 1 (torch: (2, 0, 3) has (3, 3, 1)).
Shape contiguous_strides(const Shape& shape) {
    Shape strides(shape.size());
    int64_t step = 1;
    for (size_t d = shape.size(); d-- > 0;) {
        strides[d] = step;
        step *= std::max<int64_t>(shape[d], 1);
    }
    return strides;
}

// A dim in [-ndim, ndim) made non-negative; a 0-d tensor accepts -1 and 0, as torch.
size_t wrap_dim(int64_t dim, size_t ndim) {
    const int64_t bound = std::max<int64_t>(static_cast<int64_t>(ndim), 1);
    if (dim < -bound || dim >= bound)
        throw std::out_of_range("dimension " + std::to_string(dim) + " out of range for a " +
                                std::to_string(ndim) + "-d tensor");
    return static_cast<size_t>(dim < 0 ? dim + bound : dim);
}

// Calls visit(position) for every element, in row-major order (an odometer over the index).
template <typename Visit>
void for_each_position(const Shape& shape, const Shape& strides, int64_t offset, Visit&& visit) {
    const int64_t count = numel(shape);
    if (count <= 0) return;
    std::vector<int64_t> index(shape.size(), 0);
    int64_t position = offset;
    for (int64_t i = 0; i < count; ++i) {
        visit(position);
        for (size_t d = shape.size(); d-- > 0;) {  // bump the last dim, carry to the left
            if (++index[d] < shape[d]) {
                position += strides[d];
                break;
            }
            position -= (shape[d] - 1) * strides[d];
            index[d] = 0;
        }
    }
}

// The shape of nested data; its numbers are appended to `values` in row-major order.
Shape flatten(const Nested& data, std::vector<double>& values) {
    if (data.is_number) {
        values.push_back(data.number);
        return {};
    }
    if (data.items.empty()) return {0};
    Shape inner;
    for (size_t i = 0; i < data.items.size(); ++i) {
        Shape item_shape = flatten(data.items[i], values);
        if (i == 0)
            inner = std::move(item_shape);
        else if (item_shape != inner)
            throw std::invalid_argument("ragged nested lists: every row of a dimension must have the same shape");
    }
    inner.insert(inner.begin(), static_cast<int64_t>(data.items.size()));
    return inner;
}

Nested nest(const std::vector<double>& values, const Shape& shape, size_t dim, size_t& next) {
    Nested out;
    out.items.reserve(static_cast<size_t>(shape[dim]));
    for (int64_t i = 0; i < shape[dim]; ++i)
        out.items.push_back(dim + 1 == shape.size() ? Nested{true, values[next++], {}}
                                                    : nest(values, shape, dim + 1, next));
    return out;
}

// A slice resolved as Python's slice.indices(size) for a positive step.
struct SliceRange {
    int64_t start, length, step;
};

SliceRange resolve(const Slice& slice, int64_t size) {
    const int64_t step = slice.step.value_or(1);
    if (step <= 0) throw std::invalid_argument("slice step must be greater than zero");
    // A negative bound counts from the end; then clamp into [0, size].
    const auto bound = [size](std::optional<int64_t> value, int64_t absent) {
        if (!value) return absent;
        return std::clamp<int64_t>(*value < 0 ? *value + size : *value, 0, size);
    };
    const int64_t start = bound(slice.start, 0), stop = bound(slice.stop, size);
    return {start, stop > start ? 1 + (stop - start - 1) / step : 0, step};
}

// Right-aligned broadcasting: pad the shorter with 1s; sizes equal or 1; the larger wins.
Shape broadcast_shapes(const Shape& a, const Shape& b) {
    const size_t ndim = std::max(a.size(), b.size());
    Shape out(ndim);
    for (size_t i = 1; i <= ndim; ++i) {
        const int64_t x = i <= a.size() ? a[a.size() - i] : 1;
        const int64_t y = i <= b.size() ? b[b.size() - i] : 1;
        if (x != y && x != 1 && y != 1)
            throw std::invalid_argument("shapes " + show(a) + " and " + show(b) + " do not broadcast");
        out[ndim - i] = x == 1 ? y : x;
    }
    return out;
}

// The strides a view of `new_shape` needs over this layout, or nullopt when no view can do it
// (ATen's computeStride): the old dims, from the last, in chunks laid out contiguously with
// each other; each chunk must be made of whole new dims.
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape) {
    if (shape.empty()) return Shape(new_shape.size(), 1);
    if (numel(shape) == 0) return shape == new_shape ? strides : contiguous_strides(new_shape);
    Shape new_strides(new_shape.size(), 0);
    int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
    int64_t chunk_base_stride = strides.back();
    int64_t tensor_numel = 1, view_numel = 1;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
        tensor_numel *= shape[d];
        if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
                new_strides[view_d] = view_numel * chunk_base_stride;
                view_numel *= new_shape[view_d];
                --view_d;
            }
            if (view_numel != tensor_numel) return std::nullopt;
            if (d > 0) {
                chunk_base_stride = strides[d - 1];
                tensor_numel = view_numel = 1;
            }
        }
    }
    if (view_d != -1) return std::nullopt;
    return new_strides;
}

}  // namespace detail

// ------------------------------------------------------------------ the tensor

// Invariants: shape_.size() == strides_.size(); every element's position lies in *storage_;
// grad_, when set, has this shape; a tensor with backward_fn_ has parents_ and requires grad.
class Tensor : public std::enable_shared_from_this<Tensor> {
public:
    explicit Tensor(const Nested& data, bool requires_grad = false);
    Tensor(const Tensor&) = delete;  // a tensor is a node of the graph: it has an identity
    Tensor& operator=(const Tensor&) = delete;

    // level 1: layout and views
    const Shape& shape() const { return shape_; }
    const Shape& strides() const { return strides_; }
    Nested tolist() const;
    TensorPtr transpose(int64_t dim0, int64_t dim1);
    TensorPtr permute(const std::vector<int64_t>& dims);
    TensorPtr index(const std::vector<Index>& key);
    void index_put(const std::vector<Index>& key, double value);
    TensorPtr reshape(const Shape& shape);
    bool is_contiguous() const;
    TensorPtr contiguous();

    // level 2: math
    TensorPtr add(const TensorPtr& other);
    TensorPtr sub(const TensorPtr& other);
    TensorPtr mul(const TensorPtr& other);
    TensorPtr div(const TensorPtr& other);
    TensorPtr neg();
    TensorPtr exp();
    TensorPtr log();
    TensorPtr sum(std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
    TensorPtr max(std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
    TensorPtr matmul(const TensorPtr& other);

    // level 3: autograd
    bool requires_grad() const { return requires_grad_; }
    void set_requires_grad(bool requires_grad) { requires_grad_ = requires_grad; }
    TensorPtr grad() const { return grad_; }
    void set_grad(TensorPtr grad) { grad_ = std::move(grad); }
    void backward(const TensorPtr& gradient = nullptr);

private:
    using Storage = std::shared_ptr<std::vector<double>>;
    using Grads = std::vector<TensorPtr>;  // one gradient per parent (nullptr: none)
    using BackwardFn = std::function<Grads(const TensorPtr& grad_output)>;

    struct Selection {  // what x[key] selects: a layout over this tensor's storage
        Shape shape, strides;
        int64_t offset;
    };
    struct Reduced {
        TensorPtr out;
        std::optional<size_t> dim;  // nullopt: everything was reduced
    };

    Tensor() = default;
    static TensorPtr make(Storage storage, Shape shape, Shape strides, int64_t offset);
    static TensorPtr from_values(std::vector<double> values, Shape shape);  // contiguous
    static TensorPtr gradient_for(const TensorPtr& grad, const Shape& shape);
    static TensorPtr sum_to(TensorPtr grad, const Shape& shape);
    static TensorPtr expand_like(TensorPtr grad, std::optional<size_t> dim, const Shape& shape);
    static TensorPtr bmm(const TensorPtr& a, const TensorPtr& b);
    static std::vector<Tensor*> topological_order(Tensor* root);

    size_t ndim() const { return shape_.size(); }
    int64_t numel() const { return detail::numel(shape_); }
    std::vector<double> values() const;  // row-major
    TensorPtr detached() const { return make(storage_, shape_, strides_, offset_); }
    void record(Grads parents, BackwardFn backward);
    TensorPtr view(Shape shape, Shape strides, int64_t offset, BackwardFn backward);
    Selection select(const std::vector<Index>& key) const;
    void write(const Selection& where, const std::vector<double>& values);
    TensorPtr expand(const Shape& shape);
    TensorPtr unsqueeze(size_t dim);
    template <typename Op, typename GradFn>
    TensorPtr binary(const TensorPtr& other, Op op, GradFn grads);
    template <typename Fn>
    TensorPtr map(Fn fn) const;
    template <typename Fold>
    Reduced reduce(std::optional<int64_t> dim, bool keepdim, Fold fold) const;

    Storage storage_;
    Shape shape_, strides_;
    int64_t offset_ = 0;
    bool requires_grad_ = false;
    TensorPtr grad_;
    Grads parents_;
    BackwardFn backward_fn_;
};

// ------------------------------------------------------------------ construction, graph

Tensor::Tensor(const Nested& data, bool requires_grad)
    : storage_(std::make_shared<std::vector<double>>()), requires_grad_(requires_grad) {
    shape_ = detail::flatten(data, *storage_);
    strides_ = detail::contiguous_strides(shape_);
}

TensorPtr Tensor::make(Storage storage, Shape shape, Shape strides, int64_t offset) {
    TensorPtr out(new Tensor());  // the default constructor is private: no make_shared
    out->storage_ = std::move(storage);
    out->shape_ = std::move(shape);
    out->strides_ = std::move(strides);
    out->offset_ = offset;
    return out;
}

TensorPtr Tensor::from_values(std::vector<double> values, Shape shape) {
    Shape strides = detail::contiguous_strides(shape);
    return make(std::make_shared<std::vector<double>>(std::move(values)), std::move(shape), std::move(strides), 0);
}

// Makes this tensor an op's output: in the graph when grad mode is on and an input requires grad.
void Tensor::record(Grads parents, BackwardFn backward) {
    if (!grad_enabled ||
        std::none_of(parents.begin(), parents.end(), [](const TensorPtr& p) { return p->requires_grad_; }))
        return;
    requires_grad_ = true;
    parents_ = std::move(parents);
    backward_fn_ = std::move(backward);
}

TensorPtr Tensor::view(Shape shape, Shape strides, int64_t offset, BackwardFn backward) {
    TensorPtr out = make(storage_, std::move(shape), std::move(strides), offset);
    out->record({shared_from_this()}, std::move(backward));
    return out;
}

std::vector<double> Tensor::values() const {
    std::vector<double> out;
    out.reserve(static_cast<size_t>(std::max<int64_t>(numel(), 0)));
    const std::vector<double>& storage = *storage_;
    detail::for_each_position(shape_, strides_, offset_, [&](int64_t p) { out.push_back(storage[p]); });
    return out;
}

// ------------------------------------------------------------------ level 1: views

Nested Tensor::tolist() const {
    const std::vector<double> flat = values();
    if (shape_.empty()) return Nested{true, flat[0], {}};
    size_t next = 0;
    return detail::nest(flat, shape_, 0, next);
}

TensorPtr Tensor::transpose(int64_t dim0, int64_t dim1) {
    const size_t d0 = detail::wrap_dim(dim0, ndim()), d1 = detail::wrap_dim(dim1, ndim());
    if (shape_.empty()) return view(shape_, strides_, offset_, [](const TensorPtr& g) { return Grads{g}; });
    Shape shape = shape_, strides = strides_;
    std::swap(shape[d0], shape[d1]);
    std::swap(strides[d0], strides[d1]);
    return view(std::move(shape), std::move(strides), offset_, [d0, d1](const TensorPtr& g) {
        return Grads{g->transpose(static_cast<int64_t>(d0), static_cast<int64_t>(d1))};
    });
}

TensorPtr Tensor::permute(const std::vector<int64_t>& dims) {
    const size_t n = ndim();
    if (dims.size() != n)
        throw std::invalid_argument("permute needs " + std::to_string(n) + " dims, got " + std::to_string(dims.size()));
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = detail::wrap_dim(dims[i], n);
    std::vector<int64_t> inverse(n, -1);  // inverse[order[i]] = i
    Shape shape(n), strides(n);
    for (size_t i = 0; i < n; ++i) {
        if (inverse[order[i]] != -1) throw std::invalid_argument("permute: repeated dims in " + detail::show(dims));
        inverse[order[i]] = static_cast<int64_t>(i);
        shape[i] = shape_[order[i]];
        strides[i] = strides_[order[i]];
    }
    return view(std::move(shape), std::move(strides), offset_,
                [inverse](const TensorPtr& g) { return Grads{g->permute(inverse)}; });
}

Tensor::Selection Tensor::select(const std::vector<Index>& key) const {
    if (key.size() > ndim())
        throw std::out_of_range("too many indices for a " + std::to_string(ndim()) + "-d tensor");
    Selection out{{}, {}, offset_};
    for (size_t d = 0; d < key.size(); ++d) {
        const int64_t size = shape_[d], stride = strides_[d];
        if (const Slice* slice = std::get_if<Slice>(&key[d])) {
            const detail::SliceRange range = detail::resolve(*slice, size);
            out.shape.push_back(range.length);
            out.strides.push_back(stride * range.step);
            out.offset += range.start * stride;
        } else {
            const int64_t i = std::get<int64_t>(key[d]);
            if (i < -size || i >= size)
                throw std::out_of_range("index " + std::to_string(i) + " is out of bounds for dimension " +
                                        std::to_string(d) + " with size " + std::to_string(size));
            out.offset += (i < 0 ? i + size : i) * stride;  // an int drops its dim
        }
    }
    out.shape.insert(out.shape.end(), shape_.begin() + static_cast<std::ptrdiff_t>(key.size()), shape_.end());
    out.strides.insert(out.strides.end(), strides_.begin() + static_cast<std::ptrdiff_t>(key.size()), strides_.end());
    return out;
}

void Tensor::write(const Selection& where, const std::vector<double>& values) {
    auto next = values.begin();
    std::vector<double>& storage = *storage_;
    detail::for_each_position(where.shape, where.strides, where.offset, [&](int64_t p) { storage[p] = *next++; });
}

TensorPtr Tensor::index(const std::vector<Index>& key) {
    Selection where = select(key);
    return view(std::move(where.shape), std::move(where.strides), where.offset,
                [key, parent_shape = shape_](const TensorPtr& g) {
                    // the gradient placed into zeros of the base's shape
                    TensorPtr grad = from_values(std::vector<double>(static_cast<size_t>(detail::numel(parent_shape))),
                                                 parent_shape);
                    grad->write(grad->select(key), g->values());
                    return Grads{grad};
                });
}

void Tensor::index_put(const std::vector<Index>& key, double value) {
    const Selection where = select(key);
    std::vector<double>& storage = *storage_;
    detail::for_each_position(where.shape, where.strides, where.offset, [&](int64_t p) { storage[p] = value; });
}

TensorPtr Tensor::reshape(const Shape& shape) {
    Shape wanted = shape;
    const int64_t count = numel();
    if (std::count(wanted.begin(), wanted.end(), -1) > 1 ||
        std::any_of(wanted.begin(), wanted.end(), [](int64_t s) { return s < -1; }))
        throw std::invalid_argument("invalid shape " + detail::show(wanted));
    const auto inferred = std::find(wanted.begin(), wanted.end(), -1);
    if (inferred != wanted.end()) {
        int64_t known = 1;
        for (int64_t s : wanted)
            if (s != -1) known *= s;
        if (known == 0 || count % known != 0)  // with a 0 among the sizes, -1 could be anything
            throw std::invalid_argument("shape " + detail::show(wanted) + " is invalid for " +
                                        std::to_string(count) + " elements");
        *inferred = count / known;
    }
    if (detail::numel(wanted) != count)
        throw std::invalid_argument("shape " + detail::show(wanted) + " is invalid for " + std::to_string(count) +
                                    " elements");
    BackwardFn backward = [old_shape = shape_](const TensorPtr& g) { return Grads{g->reshape(old_shape)}; };
    if (std::optional<Shape> strides = detail::view_strides(shape_, strides_, wanted))
        return view(std::move(wanted), std::move(*strides), offset_, std::move(backward));
    const TensorPtr source = contiguous();  // no view can do it: copy, then view the copy
    Shape strides = detail::contiguous_strides(wanted);
    return source->view(std::move(wanted), std::move(strides), source->offset_, std::move(backward));
}

bool Tensor::is_contiguous() const {
    if (numel() == 0) return true;
    int64_t expected = 1;
    for (size_t d = ndim(); d-- > 0;) {
        if (shape_[d] == 1) continue;  // a size-1 dim's stride is never used
        if (strides_[d] != expected) return false;
        expected *= shape_[d];
    }
    return true;
}

TensorPtr Tensor::contiguous() {
    if (is_contiguous()) return shared_from_this();
    TensorPtr out = from_values(values(), shape_);
    out->record({shared_from_this()}, [](const TensorPtr& g) { return Grads{g}; });
    return out;
}

// ------------------------------------------------------------------ level 2: math

// A broadcast view of `shape`: stride 0 where a dim is added or stretched.
TensorPtr Tensor::expand(const Shape& shape) {
    if (shape == shape_) return shared_from_this();
    if (shape.size() < ndim()) throw std::invalid_argument("expand: " + detail::show(shape) + " has fewer dims");
    const size_t lead = shape.size() - ndim();
    Shape strides(lead, 0);
    for (size_t d = 0; d < ndim(); ++d) {
        if (shape_[d] != 1 && shape_[d] != shape[lead + d])  // as torch's expand: only size-1 dims stretch
            throw std::invalid_argument("cannot expand " + detail::show(shape_) + " to " + detail::show(shape));
        strides.push_back(shape_[d] == 1 && shape[lead + d] != 1 ? 0 : strides_[d]);
    }
    return view(shape, std::move(strides), offset_,
                [own = shape_](const TensorPtr& g) { return Grads{sum_to(g, own)}; });
}

// A broadcast gradient summed back to `shape`: over the added leading dims, then the stretched ones.
TensorPtr Tensor::sum_to(TensorPtr grad, const Shape& shape) {
    while (grad->ndim() > shape.size()) grad = grad->sum(0);
    for (size_t d = 0; d < shape.size(); ++d)
        if (shape[d] == 1 && grad->shape_[d] != 1) grad = grad->sum(static_cast<int64_t>(d), true);
    return grad;
}

template <typename Op, typename GradFn>
TensorPtr Tensor::binary(const TensorPtr& other, Op op, GradFn grads) {
    const Shape shape = detail::broadcast_shapes(shape_, other->shape_);
    const TensorPtr x = expand(shape), y = other->expand(shape);
    const std::vector<double> xs = x->values(), ys = y->values();
    std::vector<double> out(xs.size());
    std::transform(xs.begin(), xs.end(), ys.begin(), out.begin(), op);
    TensorPtr result = from_values(std::move(out), shape);
    result->record({x, y}, [x, y, grads](const TensorPtr& g) { return grads(g, x, y); });
    return result;
}

// IEEE arithmetic gives torch's values: x / 0 is +-inf, 0 / 0 nan.
TensorPtr Tensor::add(const TensorPtr& other) {
    return binary(other, std::plus<>(), [](const TensorPtr& g, const TensorPtr&, const TensorPtr&) {
        return Grads{g, g};
    });
}

TensorPtr Tensor::sub(const TensorPtr& other) {
    return binary(other, std::minus<>(), [](const TensorPtr& g, const TensorPtr&, const TensorPtr&) {
        return Grads{g, g->neg()};
    });
}

TensorPtr Tensor::mul(const TensorPtr& other) {
    return binary(other, std::multiplies<>(), [](const TensorPtr& g, const TensorPtr& x, const TensorPtr& y) {
        return Grads{g->mul(y), g->mul(x)};
    });
}

TensorPtr Tensor::div(const TensorPtr& other) {
    return binary(other, std::divides<>(), [](const TensorPtr& g, const TensorPtr& x, const TensorPtr& y) {
        return Grads{g->div(y), g->mul(x)->div(y->mul(y))->neg()};  // d(x/y)/dy = -x / y^2
    });
}

template <typename Fn>
TensorPtr Tensor::map(Fn fn) const {
    std::vector<double> out = values();
    std::transform(out.begin(), out.end(), out.begin(), fn);
    return from_values(std::move(out), shape_);
}

TensorPtr Tensor::neg() {
    TensorPtr out = map(std::negate<>());
    out->record({shared_from_this()}, [](const TensorPtr& g) { return Grads{g->neg()}; });
    return out;
}

TensorPtr Tensor::exp() {
    TensorPtr out = map([](double v) { return std::exp(v); });  // inf where it overflows
    // the saved output is a plain alias: capturing `out` itself would make a cycle
    out->record({shared_from_this()}, [saved = out->detached()](const TensorPtr& g) { return Grads{g->mul(saved)}; });
    return out;
}

TensorPtr Tensor::log() {
    TensorPtr out = map([](double v) { return std::log(v); });  // log(0) = -inf, log(x < 0) = nan
    out->record({shared_from_this()}, [x = shared_from_this()](const TensorPtr& g) { return Grads{g->div(x)}; });
    return out;
}

// fold(first, last) of each output's inputs: everything (dim nullopt), or along one dim.
template <typename Fold>
Tensor::Reduced Tensor::reduce(std::optional<int64_t> dim, bool keepdim, Fold fold) const {
    if (!dim) {
        const std::vector<double> all = values();
        return {from_values(std::vector<double>(1, fold(all.begin(), all.end())), keepdim ? Shape(ndim(), 1) : Shape{}),
                std::nullopt};
    }
    const size_t d = detail::wrap_dim(*dim, ndim());
    if (shape_.empty()) {
        const std::vector<double> all = values();
        return {from_values(std::vector<double>(1, fold(all.begin(), all.end())), Shape{}), d};
    }
    // dim d moved last: the inputs of each output are then consecutive
    Shape moved_shape, moved_strides;
    for (size_t i = 0; i < ndim(); ++i) {
        if (i == d) continue;
        moved_shape.push_back(shape_[i]);
        moved_strides.push_back(strides_[i]);
    }
    moved_shape.push_back(shape_[d]);
    moved_strides.push_back(strides_[d]);
    const std::vector<double> moved = make(storage_, moved_shape, moved_strides, offset_)->values();
    Shape out_shape = shape_;
    if (keepdim)
        out_shape[d] = 1;
    else
        out_shape.erase(out_shape.begin() + static_cast<std::ptrdiff_t>(d));
    const int64_t k = shape_[d], num_out = detail::numel(out_shape);
    std::vector<double> out(static_cast<size_t>(num_out));
    for (int64_t i = 0; i < num_out; ++i) out[i] = fold(moved.begin() + i * k, moved.begin() + (i + 1) * k);
    return {from_values(std::move(out), std::move(out_shape)), d};
}

// A sum's gradient broadcast back over the reduced dims: a contiguous tensor of `shape`.
TensorPtr Tensor::expand_like(TensorPtr grad, std::optional<size_t> dim, const Shape& shape) {
    if (!dim)
        grad = grad->reshape(Shape(shape.size(), 1));
    else if (!shape.empty() && grad->ndim() < shape.size())
        grad = grad->unsqueeze(*dim);
    return from_values(grad->expand(shape)->values(), shape);
}

TensorPtr Tensor::unsqueeze(size_t dim) {
    Shape shape = shape_;
    shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(dim), 1);
    return reshape(shape);
}

TensorPtr Tensor::sum(std::optional<int64_t> dim, bool keepdim) {
    using Iter = std::vector<double>::const_iterator;
    Reduced r = reduce(dim, keepdim, [](Iter first, Iter last) { return std::accumulate(first, last, 0.0); });
    r.out->record({shared_from_this()}, [d = r.dim, own = shape_](const TensorPtr& g) {
        return Grads{expand_like(g, d, own)};
    });
    return r.out;
}

TensorPtr Tensor::max(std::optional<int64_t> dim, bool keepdim) {
    if (!dim && numel() == 0) throw std::invalid_argument("max() of an empty tensor: give a dim");
    if (dim && !shape_.empty() && shape_[detail::wrap_dim(*dim, ndim())] == 0)
        throw std::out_of_range("max(): dimension " + std::to_string(*dim) + " has size 0");
    using Iter = std::vector<double>::const_iterator;
    Reduced r = reduce(dim, keepdim, [](Iter first, Iter last) { return *std::max_element(first, last); });
    const double top = r.out->values()[0];  // the maximum, for max()'s backward
    r.out->record({shared_from_this()}, [x = shared_from_this(), d = r.dim, keepdim, top](const TensorPtr& g) {
        const std::vector<double> xs = x->values();
        const Shape& own = x->shape_;
        std::vector<double> grad(xs.size(), 0.0);
        if (!d) {  // every maximal element gets an equal share, as torch's max()
            const auto ties = std::count(xs.begin(), xs.end(), top);
            const double share = g->values()[0] / static_cast<double>(ties);
            std::transform(xs.begin(), xs.end(), grad.begin(), [&](double v) { return v == top ? share : 0.0; });
            return Grads{from_values(std::move(grad), own)};
        }
        if (own.empty()) return Grads{g};
        const std::vector<double> flat_g = (keepdim ? g : g->unsqueeze(*d))->values();
        // the first maximal element along d gets the gradient, as torch's max(dim) indices
        const int64_t k = own[*d];
        const int64_t outer = detail::numel(Shape(own.begin(), own.begin() + static_cast<std::ptrdiff_t>(*d)));
        const int64_t inner = detail::numel(Shape(own.begin() + static_cast<std::ptrdiff_t>(*d) + 1, own.end()));
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i) {
                const int64_t base = o * k * inner + i;
                int64_t best = 0;
                for (int64_t j = 1; j < k; ++j)
                    if (xs[base + j * inner] > xs[base + best * inner]) best = j;
                grad[base + best * inner] = flat_g[o * inner + i];
            }
        return Grads{from_values(std::move(grad), own)};
    });
    return r.out;
}

// (NB, n, k) @ (NB, k, m) -> (NB, n, m)
TensorPtr Tensor::bmm(const TensorPtr& a, const TensorPtr& b) {
    const int64_t num_batch = a->shape_[0], n = a->shape_[1], k = a->shape_[2], m = b->shape_[2];
    const std::vector<double> av = a->values(), bv = b->values();
    std::vector<double> out(static_cast<size_t>(num_batch * n * m), 0.0);
    for (int64_t z = 0; z < num_batch; ++z)
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < m; ++j) {
                double acc = 0.0;
                for (int64_t t = 0; t < k; ++t) acc += av[(z * n + i) * k + t] * bv[(z * k + t) * m + j];
                out[(z * n + i) * m + j] = acc;
            }
    TensorPtr result = from_values(std::move(out), {num_batch, n, m});
    result->record({a, b}, [a, b](const TensorPtr& g) {
        return Grads{bmm(g, b->transpose(1, 2)), bmm(a->transpose(1, 2), g)};
    });
    return result;
}

TensorPtr Tensor::matmul(const TensorPtr& other) {
    if (ndim() == 0 || other->ndim() == 0) throw std::invalid_argument("matmul needs operands of at least 1 dimension");
    // a 1-D first operand is a row (1, k), a 1-D second one a column (k, 1)
    const TensorPtr a = ndim() == 1 ? reshape({1, shape_[0]}) : shared_from_this();
    const TensorPtr b = other->ndim() == 1 ? other->reshape({other->shape_[0], 1}) : other;
    const int64_t n = a->shape_[a->ndim() - 2], k = a->shape_.back();
    const int64_t k2 = b->shape_[b->ndim() - 2], m = b->shape_.back();
    if (k != k2)
        throw std::invalid_argument("matmul: shapes " + detail::show(shape_) + " and " + detail::show(other->shape_) +
                                    " do not fit (" + std::to_string(k) + " != " + std::to_string(k2) + ")");
    const Shape batch = detail::broadcast_shapes(Shape(a->shape_.begin(), a->shape_.end() - 2),
                                                 Shape(b->shape_.begin(), b->shape_.end() - 2));
    const auto batched = [&batch](int64_t rows, int64_t cols) {
        Shape shape = batch;
        shape.push_back(rows);
        shape.push_back(cols);
        return shape;
    };
    const int64_t num_batch = detail::numel(batch);
    const TensorPtr a3 = a->expand(batched(n, k))->reshape({num_batch, n, k});  // (NB, n, k)
    const TensorPtr b3 = b->expand(batched(k, m))->reshape({num_batch, k, m});  // (NB, k, m)
    TensorPtr out = bmm(a3, b3)->reshape(batched(n, m));                         // (..., n, m)
    if (ndim() == 1) {  // the row's dim goes
        Shape shape(out->shape_.begin(), out->shape_.end() - 2);
        shape.push_back(m);
        out = out->reshape(shape);
    }
    if (other->ndim() == 1) out = out->reshape(Shape(out->shape_.begin(), out->shape_.end() - 1));  // the column's
    return out;
}

// ------------------------------------------------------------------ level 3: autograd

// Nodes reachable from root, each after all of its parents (an iterative DFS, each node once).
std::vector<Tensor*> Tensor::topological_order(Tensor* root) {
    std::vector<Tensor*> order;
    std::unordered_set<const Tensor*> seen{root};
    std::vector<std::pair<Tensor*, size_t>> stack{{root, 0}};  // (node, its next parent to visit)
    while (!stack.empty()) {
        auto& [node, next] = stack.back();
        if (next < node->parents_.size()) {
            Tensor* parent = node->parents_[next++].get();
            // emplace_back may move the stack: node and next are not used after it
            if (seen.insert(parent).second) stack.emplace_back(parent, 0);
        } else {
            order.push_back(node);
            stack.pop_back();
        }
    }
    return order;
}

// A fresh contiguous copy of a gradient, checked against the shape of the tensor it is for.
TensorPtr Tensor::gradient_for(const TensorPtr& grad, const Shape& shape) {
    std::vector<double> flat = grad->values();
    if (static_cast<int64_t>(flat.size()) != detail::numel(shape))
        throw std::logic_error("a gradient of shape " + detail::show(grad->shape_) + " for a tensor of shape " +
                               detail::show(shape));
    return from_values(std::move(flat), shape);
}

void Tensor::backward(const TensorPtr& gradient) {
    if (!requires_grad_) throw std::runtime_error("backward() of a tensor that does not require grad");
    TensorPtr seed;
    if (!gradient) {
        if (numel() != 1) throw std::runtime_error("backward() without a gradient needs a tensor of one element");
        seed = from_values({1.0}, shape_);
    } else {
        if (gradient->shape_ != shape_)
            throw std::runtime_error("gradient of shape " + detail::show(gradient->shape_) + " for a tensor of shape " +
                                     detail::show(shape_));
        seed = gradient_for(gradient, shape_);
    }
    const std::vector<Tensor*> order = topological_order(this);
    std::unordered_map<const Tensor*, TensorPtr> grads{{this, seed}};  // node -> sum of its uses' gradients
    NoGradGuard no_grad;  // backward builds no graph
    for (auto it = order.rbegin(); it != order.rend(); ++it) {  // every user of a node runs before the node
        Tensor* node = *it;
        const auto found = grads.find(node);
        if (found == grads.end()) continue;
        const TensorPtr g = std::move(found->second);
        grads.erase(found);
        if (!node->backward_fn_) {  // a leaf
            if (node->requires_grad_) node->grad_ = node->grad_ ? node->grad_->add(g) : g;
            continue;
        }
        const Grads parent_grads = node->backward_fn_(g);
        for (size_t i = 0; i < node->parents_.size(); ++i) {
            const TensorPtr& parent = node->parents_[i];
            if (!parent_grads[i] || !parent->requires_grad_) continue;
            TensorPtr pg = gradient_for(parent_grads[i], parent->shape_);
            auto [slot, inserted] = grads.try_emplace(parent.get(), pg);
            if (!inserted) slot->second = slot->second->add(pg);
        }
    }
}

// ---- bindings: you do not need to change anything below ----
// They turn Python values into the plain C++ types above and back: nested lists <-> Nested,
// int / slice / tuple keys -> std::vector<Index>, *dims -> std::vector<int64_t>, a Python
// number on either side of an operator -> a 0-d Tensor, shape and strides -> tuples, a null
// grad -> None, and the errors (KeyError, NotImplemented) -> Python's.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace bindings {

std::string type_name(const py::handle& value) {
    return py::str(py::type::of(value).attr("__name__")).cast<std::string>();
}

bool is_number(const py::handle& value) {
    return (py::isinstance<py::int_>(value) || py::isinstance<py::float_>(value)) && !py::isinstance<py::bool_>(value);
}

// A Python int (an index, a dim, a size, a slice bound); huge values are clamped, as slices do.
int64_t to_int(const py::handle& value, const char* what) {
    if (!PyIndex_Check(value.ptr())) throw py::type_error(std::string(what) + " must be ints, not " + type_name(value));
    const Py_ssize_t out = PyNumber_AsSsize_t(value.ptr(), nullptr);
    if (out == -1 && PyErr_Occurred()) throw py::error_already_set();
    return static_cast<int64_t>(out);
}

Nested nested_from_python(const py::handle& data) {
    if (is_number(data)) return Nested{true, data.cast<double>(), {}};
    if (py::isinstance<py::list>(data) || py::isinstance<py::tuple>(data)) {
        Nested out;
        for (const py::handle item : data) out.items.push_back(nested_from_python(item));
        return out;
    }
    throw py::type_error("Tensor data must be numbers or nested lists, not " + type_name(data));
}

py::object nested_to_python(const Nested& value) {
    if (value.is_number) return py::float_(value.number);
    py::list out(value.items.size());
    for (size_t i = 0; i < value.items.size(); ++i) out[i] = nested_to_python(value.items[i]);
    return std::move(out);
}

py::tuple to_tuple(const Shape& values) {
    py::tuple out(values.size());
    for (size_t i = 0; i < values.size(); ++i) out[i] = py::int_(values[i]);
    return out;
}

std::optional<int64_t> slice_part(const py::object& part) {
    if (part.is_none()) return std::nullopt;
    return to_int(part, "slice indices");
}

Index index_from_python(const py::handle& key) {
    if (py::isinstance<py::slice>(key))
        return Slice{slice_part(key.attr("start")), slice_part(key.attr("stop")), slice_part(key.attr("step"))};
    if (py::isinstance<py::int_>(key) && !py::isinstance<py::bool_>(key)) return to_int(key, "indices");
    throw py::type_error("indices must be ints or slices, not " + type_name(key));
}

// x[i], x[a:b], x[i, a:b, ...]
std::vector<Index> key_from_python(const py::object& key) {
    std::vector<Index> out;
    if (py::isinstance<py::tuple>(key)) {
        for (const py::handle part : key) out.push_back(index_from_python(part));
    } else {
        out.push_back(index_from_python(key));
    }
    return out;
}

// permute(1, 0) and permute((1, 0)); reshape(2, 3) and reshape((2, 3))
std::vector<int64_t> ints_from_args(const py::args& args) {
    py::object items = args;
    if (args.size() == 1 && (py::isinstance<py::tuple>(args[0]) || py::isinstance<py::list>(args[0])))
        items = args[0];
    std::vector<int64_t> out;
    for (const py::handle item : items) out.push_back(to_int(item, "dims and sizes"));
    return out;
}

// A Tensor, or a Python number as a 0-d Tensor; nullptr for anything else.
TensorPtr operand(const py::handle& value) {
    if (py::isinstance<Tensor>(value)) return value.cast<TensorPtr>();
    if (is_number(value)) return std::make_shared<Tensor>(Nested{true, value.cast<double>(), {}});
    return nullptr;
}

TensorPtr required_operand(const py::handle& value) {
    TensorPtr out = operand(value);
    if (!out) throw py::type_error("expected a Tensor or a number, not " + type_name(value));
    return out;
}

TensorPtr optional_tensor(const py::object& value) {
    return value.is_none() ? nullptr : value.cast<TensorPtr>();
}

using BinaryOp = TensorPtr (Tensor::*)(const TensorPtr&);

auto method(BinaryOp op) {  // x.add(other)
    return [op](Tensor& self, const py::handle& other) { return (self.*op)(required_operand(other)); };
}

auto forward_op(BinaryOp op) {  // x + other; NotImplemented lets Python try other's operator
    return [op](Tensor& self, const py::handle& other) -> py::object {
        const TensorPtr b = operand(other);
        if (!b) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        return py::cast((self.*op)(b));
    };
}

auto reflected_op(BinaryOp op) {  // other + x, with other a number
    return [op](Tensor& self, const py::handle& other) -> py::object {
        const TensorPtr a = operand(other);
        if (!a) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        return py::cast(((*a).*op)(self.shared_from_this()));
    };
}

}  // namespace bindings

PYBIND11_MODULE(tensor_lib, m) {
    using namespace bindings;
    m.doc() = "tensor-lib: a strided float64 Tensor (C++)";

    py::register_exception_translator([](std::exception_ptr error) {
        try {
            if (error) std::rethrow_exception(error);
        } catch (const KeyError& e) {
            PyErr_SetString(PyExc_KeyError, e.what());
        } catch (const NotImplemented& e) {
            PyErr_SetString(PyExc_NotImplementedError, e.what());
        }
    });

    py::class_<Tensor, TensorPtr> tensor(m, "Tensor");
    tensor.def(py::init([](const py::object& data, bool requires_grad) {
                   return std::make_shared<Tensor>(nested_from_python(data), requires_grad);
               }),
               py::arg("data"), py::arg("requires_grad") = false);
    tensor.def_property_readonly("shape", [](const Tensor& self) { return to_tuple(self.shape()); });
    tensor.def_property_readonly("strides", [](const Tensor& self) { return to_tuple(self.strides()); });
    tensor.def("tolist", [](const Tensor& self) { return nested_to_python(self.tolist()); });
    tensor.def("transpose", &Tensor::transpose, py::arg("dim0"), py::arg("dim1"));
    tensor.def("permute", [](Tensor& self, const py::args& dims) { return self.permute(ints_from_args(dims)); });
    tensor.def("__getitem__", [](Tensor& self, const py::object& key) { return self.index(key_from_python(key)); });
    tensor.def("__setitem__", [](Tensor& self, const py::object& key, double value) {
        self.index_put(key_from_python(key), value);
    });
    tensor.def("reshape", [](Tensor& self, const py::args& shape) { return self.reshape(ints_from_args(shape)); });
    tensor.def("is_contiguous", &Tensor::is_contiguous);
    tensor.def("contiguous", &Tensor::contiguous);
    tensor.def("__repr__", [](const Tensor& self) {
        return "Tensor(" + py::repr(nested_to_python(self.tolist())).cast<std::string>() +
               ", shape=" + py::repr(to_tuple(self.shape())).cast<std::string>() + ")";
    });
    // [level 2]
    tensor.def("add", method(&Tensor::add), py::arg("other"));
    tensor.def("sub", method(&Tensor::sub), py::arg("other"));
    tensor.def("mul", method(&Tensor::mul), py::arg("other"));
    tensor.def("div", method(&Tensor::div), py::arg("other"));
    tensor.def("neg", &Tensor::neg);
    tensor.def("exp", &Tensor::exp);
    tensor.def("log", &Tensor::log);
    tensor.def("sum", &Tensor::sum, py::arg("dim") = py::none(), py::arg("keepdim") = false);
    tensor.def("max", &Tensor::max, py::arg("dim") = py::none(), py::arg("keepdim") = false);
    tensor.def("matmul", method(&Tensor::matmul), py::arg("other"));
    tensor.def("__add__", forward_op(&Tensor::add));
    tensor.def("__radd__", reflected_op(&Tensor::add));
    tensor.def("__sub__", forward_op(&Tensor::sub));
    tensor.def("__rsub__", reflected_op(&Tensor::sub));
    tensor.def("__mul__", forward_op(&Tensor::mul));
    tensor.def("__rmul__", reflected_op(&Tensor::mul));
    tensor.def("__truediv__", forward_op(&Tensor::div));
    tensor.def("__rtruediv__", reflected_op(&Tensor::div));
    tensor.def("__matmul__", forward_op(&Tensor::matmul));
    tensor.def("__neg__", &Tensor::neg);
    // [/level 2]
    // [level 3]
    tensor.def_property("requires_grad", &Tensor::requires_grad, &Tensor::set_requires_grad);
    tensor.def_property(
        "grad", [](const Tensor& self) { return self.grad(); },
        [](Tensor& self, const py::object& grad) { self.set_grad(optional_tensor(grad)); });
    tensor.def(
        "backward", [](Tensor& self, const py::object& gradient) { self.backward(optional_tensor(gradient)); },
        py::arg("gradient") = py::none());
    py::class_<NoGrad>(m, "no_grad", "`with tensor_lib.no_grad():` operations inside record no graph")
        .def(py::init<>())
        .def("__enter__", [](NoGrad& self) { self.enter(); })
        .def("__exit__", [](NoGrad& self, const py::args&) {
            self.exit();
            return false;  // an exception raised in the block propagates
        });
    // [/level 3]
}
