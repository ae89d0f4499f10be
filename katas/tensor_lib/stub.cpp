// A tensor library in C++17: float64 values in one flat storage, read through a shape,
// strides (in elements) and an offset, as torch.Tensor does; then broadcasting, reductions
// and matmul; then reverse-mode autograd. `kata show tensor-lib` has the statement.
//
// Worked example, as Python sees your module:
//
//     x = Tensor([[1, 2, 3], [4, 5, 6]])
//     x.shape == (2, 3), x.strides == (3, 1), x.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
//     x.transpose(0, 1).strides == (1, 3)      (a view: no value is copied)
//     x[:, ::2].tolist() == [[1.0, 3.0], [4.0, 6.0]], strides (3, 2)
//
// Levels:
//   1. Tensor(data), shape, strides, tolist, transpose, permute, x[key], x[key] = v, reshape,
//      is_contiguous, contiguous: views share the storage; reshape copies only when it must.
//   2. add / sub / mul / div / neg / exp / log with broadcasting, sum, max, matmul: every
//      result equal to torch's. The operators + - * / @ and unary - are bound to these
//      methods below; a Python number on either side arrives as a 0-d Tensor (shape ()).
//   3. requires_grad, backward(gradient), grad, no_grad: gradients equal to torch.autograd's.
//
// The standard library only. Write plain C++: the bindings at the bottom turn Python values
// into the types below and back (nested lists <-> Nested, x[key] -> std::vector<Index>,
// permute(*dims) / reshape(*shape) -> std::vector<int64_t>, shape / strides -> tuples,
// a null grad -> None). Errors reach Python as:
//   ValueError          <- throw std::invalid_argument(msg)
//   IndexError          <- throw std::out_of_range(msg)
//   RuntimeError        <- throw std::runtime_error(msg)   (backward's misuse)
//   KeyError            <- throw KeyError(msg)             (defined below; not used here)
//   NotImplementedError <- throw NotImplemented(msg)       (defined below)

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

// [level 3] ---------------------------------------------------- no_grad
// `with tensor_lib.no_grad():` calls enter() on the way in and exit() on the way
// out, also when the body raised; each block is its own NoGrad, and blocks nest. Inside,
// operations record no graph (their results do not require grad).
class NoGrad {
public:
    void enter() {
        // TODO level 3: a grad-mode flag for the module (on at the start); remember its value
        // here, then turn it off.
        throw NotImplemented("NoGrad::enter");
    }

    void exit() {
        // TODO level 3: bring back the value enter() remembered.
        throw NotImplemented("NoGrad::exit");
    }
};
// [/level 3]

// float64 values over a flat storage: element (i0, ..., ik) is
// (*storage_)[offset_ + i0 * strides_[0] + ... + ik * strides_[k]].
// Invariants: shape_.size() == strides_.size(); views (transpose, permute, indexing, a reshape
// the layout allows) share the storage of their base; grad_, when set, has this shape.
// Tensors live in std::shared_ptr (TensorPtr): an operation returns a new one (or, for
// contiguous(), this one: shared_from_this()).
class Tensor : public std::enable_shared_from_this<Tensor> {
public:
    // data: a number (a 0-d tensor, shape ()) or nested lists of numbers; [] is shape (0,),
    // [[]] shape (1, 0). Contiguous row-major strides: strides[d] = product of the larger of size and 1
    // over the dims after d, as torch. requires_grad (level 3) is settable later; grad starts null.
    // Throws std::invalid_argument: ragged lists ([[1], [2, 3]]).
    explicit Tensor([[maybe_unused]] const Nested& data, [[maybe_unused]] bool requires_grad = false) {
        // TODO level 1: flatten into the storage; shape, strides, offset 0.
        throw NotImplemented("Tensor::Tensor");
    }

    Tensor(const Tensor&) = delete;  // a tensor is a node of the graph: it has an identity
    Tensor& operator=(const Tensor&) = delete;

    // ---------------------------------------------------------------- level 1: layout

    // The sizes (() for a 0-d tensor).
    const Shape& shape() const {
        // TODO level 1
        throw NotImplemented("Tensor::shape");
    }

    // Storage steps per dim, in elements (torch's .stride()).
    const Shape& strides() const {
        // TODO level 1
        throw NotImplemented("Tensor::strides");
    }

    // The values as nested lists, as torch's tolist(); a number for a 0-d tensor.
    Nested tolist() const {
        // TODO level 1
        throw NotImplemented("Tensor::tolist");
    }

    // A view with dims dim0 and dim1 swapped (negative dims count from the end).
    // Throws std::out_of_range: a dim out of range.
    TensorPtr transpose([[maybe_unused]] int64_t dim0, [[maybe_unused]] int64_t dim1) {
        // TODO level 1: swap shape and strides; share the storage and the offset.
        throw NotImplemented("Tensor::transpose");
    }

    // A view with dims reordered: result dim i is this tensor's dim dims[i] (Python's
    // permute(1, 0) and permute((1, 0)) both arrive as {1, 0}).
    // Throws std::out_of_range: a dim out of range; std::invalid_argument: not a permutation
    // of all dims.
    TensorPtr permute([[maybe_unused]] const std::vector<int64_t>& dims) {
        // TODO level 1
        throw NotImplemented("Tensor::permute");
    }

    // x[i], x[a:b:step], x[i, a:b] ...: one Index per leading dim; the rest of the dims are
    // kept. Python's rules for negative and out-of-range slice bounds. Always a view (an int
    // removes its dim; x[i] of a 1-D tensor is 0-d).
    // Throws std::out_of_range: an int out of range, more indices than dims;
    // std::invalid_argument: a slice step <= 0.
    TensorPtr index([[maybe_unused]] const std::vector<Index>& key) {
        // TODO level 1: offset += start * stride; stride *= step; size = len(range(...)).
        throw NotImplemented("Tensor::index");
    }

    // x[key] = value: writes the number into every element x[key] selects (in the storage, so
    // every view of it sees the write). Not part of autograd.
    void index_put([[maybe_unused]] const std::vector<Index>& key, [[maybe_unused]] double value) {
        // TODO level 1
        throw NotImplemented("Tensor::index_put");
    }

    // reshape(2, 3) or reshape((2, 3)) in Python; one -1 is inferred. A view, with the strides
    // torch.Tensor.view gives, whenever the layout allows one; otherwise a contiguous copy.
    // Throws std::invalid_argument: a shape of another number of elements, more than one -1,
    // a size below -1, a -1 among sizes whose product is 0.
    TensorPtr reshape([[maybe_unused]] const Shape& shape) {
        // TODO level 1: decide when a view is possible (torch's rule), else copy.
        throw NotImplemented("Tensor::reshape");
    }

    // True when the strides are row-major for this shape, ignoring dims of size 1; a tensor
    // with no elements is contiguous (torch's rule).
    bool is_contiguous() const {
        // TODO level 1
        throw NotImplemented("Tensor::is_contiguous");
    }

    // This tensor itself (shared_from_this()) when it is contiguous, else a row-major copy.
    TensorPtr contiguous() {
        // TODO level 1
        throw NotImplemented("Tensor::contiguous");
    }

    // [level 2] ---------------------------------------------------- math
    // Every result is a new contiguous tensor.

    // Elementwise this + other, broadcast as torch (other may be 0-d: a Python number).
    // Throws std::invalid_argument: shapes that do not broadcast.
    TensorPtr add([[maybe_unused]] const TensorPtr& other) {
        // TODO level 2
        throw NotImplemented("Tensor::add");
    }

    // Elementwise this - other, broadcast.
    TensorPtr sub([[maybe_unused]] const TensorPtr& other) {
        throw NotImplemented("Tensor::sub");
    }

    // Elementwise this * other, broadcast.
    TensorPtr mul([[maybe_unused]] const TensorPtr& other) {
        throw NotImplemented("Tensor::mul");
    }

    // Elementwise this / other, broadcast; x / 0 is +-inf and 0 / 0 is nan (IEEE, as torch).
    TensorPtr div([[maybe_unused]] const TensorPtr& other) {
        throw NotImplemented("Tensor::div");
    }

    // Elementwise -this.
    TensorPtr neg() {
        throw NotImplemented("Tensor::neg");
    }

    // Elementwise e ** this (inf where it overflows).
    TensorPtr exp() {
        throw NotImplemented("Tensor::exp");
    }

    // Elementwise natural log: log(0) = -inf, log(x < 0) = nan.
    TensorPtr log() {
        throw NotImplemented("Tensor::log");
    }

    // Sum over `dim`, or over everything (a 0-d tensor) when dim is nullopt; keepdim keeps
    // each reduced dim with size 1. A sum over nothing is 0.
    // Throws std::out_of_range: a dim out of range.
    TensorPtr sum([[maybe_unused]] std::optional<int64_t> dim = std::nullopt, [[maybe_unused]] bool keepdim = false) {
        // TODO level 2
        throw NotImplemented("Tensor::sum");
    }

    // The largest value over `dim`, or over everything (0-d) when dim is nullopt: the values
    // only (torch.max(dim) also returns indices; this does not).
    // Throws std::invalid_argument: max() of an empty tensor; std::out_of_range: a dim out of
    // range, or a reduced dim of size 0.
    TensorPtr max([[maybe_unused]] std::optional<int64_t> dim = std::nullopt, [[maybe_unused]] bool keepdim = false) {
        // TODO level 2
        throw NotImplemented("Tensor::max");
    }

    // torch.matmul: (..., n, k) @ (..., k, m) -> (..., n, m) with the batch dims broadcast; a
    // 1-D first operand is a row (its dim removed from the result), a 1-D second operand a
    // column (removed too); 1-D @ 1-D is a 0-d dot product.
    // Throws std::invalid_argument: a 0-d operand, inner dims that differ, batch dims that do
    // not broadcast.
    TensorPtr matmul([[maybe_unused]] const TensorPtr& other) {
        // TODO level 2
        throw NotImplemented("Tensor::matmul");
    }
    // [/level 2]

    // [level 3] ---------------------------------------------------- autograd

    // Attributes in Python: x.requires_grad (settable, on a leaf) and x.grad (None while null).
    bool requires_grad() const { return requires_grad_; }
    void set_requires_grad(bool requires_grad) { requires_grad_ = requires_grad; }
    TensorPtr grad() const { return grad_; }
    void set_grad(TensorPtr grad) { grad_ = std::move(grad); }

    // Accumulates d(this)/d(leaf), weighted by `gradient` (a tensor of this shape; 1.0 when
    // null), into the grad of every leaf that requires grad (tensors made with Tensor(...);
    // results of operations are not leaves). Each operation's backward runs once.
    // Throws std::runtime_error: this does not require grad; no gradient and this has more
    // than one element; a gradient of another shape.
    void backward([[maybe_unused]] const TensorPtr& gradient = nullptr) {
        // TODO level 3: order the graph, then run each node's backward once, in reverse.
        throw NotImplemented("Tensor::backward");
    }
    // [/level 3]

private:
    // TODO: what your tensor needs. A start:
    std::shared_ptr<std::vector<double>> storage_;  // shared by every view
    Shape shape_, strides_;
    int64_t offset_ = 0;
    bool requires_grad_ = false;
    TensorPtr grad_;
    // [level 3]
    // level 3: what a node of the graph records (its inputs, a backward function)
    // [/level 3]
};

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
