"""Tests for sfapprox._validation: square-matrix checks and memory refusals."""

from __future__ import annotations

import re
from decimal import Decimal
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from sfapprox._errors import InputError, ResourceError
from sfapprox._validation import (
    canonical_csr,
    check_memory,
    check_sparse_structure,
    check_square_matrix,
    default_memory_limit,
    estimate_dense_bytes,
    format_bytes,
)


def _one_line_error(exc_info, source="array"):
    msg = str(exc_info.value)
    assert "\n" not in msg
    assert msg.startswith(source)
    return msg


class TestDense:
    def test_int_list_becomes_float64_c_contiguous(self):
        out = check_square_matrix([[1, 2], [3, 4]])
        assert out.dtype == np.float64 and out.flags.c_contiguous
        np.testing.assert_array_equal(out, [[1, 2], [3, 4]])

    def test_float64_c_array_is_not_copied(self):
        X = np.eye(3)
        assert check_square_matrix(X) is X

    def test_fortran_order_made_c_contiguous(self):
        X = np.asfortranarray(np.arange(9.0).reshape(3, 3))
        out = check_square_matrix(X)
        assert out.flags.c_contiguous
        np.testing.assert_array_equal(out, X)

    def test_bool_and_float32_accepted(self):
        assert check_square_matrix(np.eye(2, dtype=bool)).dtype == np.float64
        assert check_square_matrix(np.eye(2, dtype=np.float32)).dtype == np.float64

    def test_not_square(self):
        with pytest.raises(InputError, match=r"matrix is not square \(3 x 5\)") as info:
            check_square_matrix(np.zeros((3, 5)), source="data.csv")
        assert "covariance" in _one_line_error(info, "data.csv")

    @pytest.mark.parametrize("shape", [(3,), (2, 2, 2), ()])
    def test_not_2d(self, shape):
        with pytest.raises(InputError, match="must be 2-D") as info:
            check_square_matrix(np.zeros(shape))
        _one_line_error(info)

    @pytest.mark.parametrize("shape", [(0, 0), (0, 3)])
    def test_empty(self, shape):
        with pytest.raises(InputError, match="empty") as info:
            check_square_matrix(np.zeros(shape))
        _one_line_error(info)

    def test_complex(self):
        with pytest.raises(InputError, match="complex matrices are not supported"):
            check_square_matrix(np.eye(2) * 1j)

    def test_object(self):
        with pytest.raises(InputError, match="object dtype"):
            check_square_matrix(np.array([[1, None], [2, 3]], dtype=object))

    def test_object_array_of_numbers_is_read_as_float64(self):
        # what numpy makes of a pandas frame of nullable dtypes: the products took it, the matrix was refused
        got = check_square_matrix(np.array([[1, 2.5], [Decimal("3"), np.int64(4)]], dtype=object))
        assert got.dtype == np.float64 and got.flags.c_contiguous
        np.testing.assert_array_equal(got, [[1, 2.5], [3, 4]])

    def test_object_array_names_what_is_no_number(self):
        with pytest.raises(InputError, match=r"X: entry \[0, 1\] of the matrix is 'a' \(str\), not a number \(object dtype\); "
                                             r"convert it to a numeric array first$") as info:
            check_square_matrix(np.array([[1, "a"], [2, 3]], dtype=object), source="X")
        _one_line_error(info, source="X")
        # a Python int beyond float64: numpy's raw OverflowError ("int too large to convert to float") before
        with pytest.raises(InputError, match=r"X: an entry of the matrix is numbers that cannot be read as float64"):
            check_square_matrix(np.array([[1, 10**400], [2, 3]], dtype=object), source="X")

    def test_object_array_of_complex_numbers_is_refused_as_complex(self):
        with pytest.raises(InputError, match="complex matrices are not supported"):
            check_square_matrix(np.array([[1, 2j], [2, 3]], dtype=object))

    def test_pandas_frame_of_nullable_dtype(self):
        pd = pytest.importorskip("pandas")
        frame = pd.DataFrame([[1.0, 2.0], [3.0, 4.0]]).astype("Float64")
        np.testing.assert_array_equal(check_square_matrix(frame), [[1, 2], [3, 4]])
        with pytest.raises(InputError, match=r"entry \[0, 0\] of the matrix is <NA> \(NAType\), not a number \(object dtype\); a missing value"):
            check_square_matrix(frame.mask(np.eye(2, dtype=bool)))

    def test_object_array_copy_is_checked_against_the_memory_limit(self):
        with pytest.raises(ResourceError, match="float64 copy of the matrix"):
            check_square_matrix(np.ones((64, 64)).astype(object), max_memory=1000)

    def test_none_says_a_matrix_is_needed(self):
        # it said "object dtype": np.asarray(None) is a 0-d object array
        with pytest.raises(InputError, match="a matrix is needed .* got None"):
            check_square_matrix(None)

    def test_strings(self):
        with pytest.raises(InputError, match="non-numeric dtype"):
            check_square_matrix(np.array([["a", "b"], ["c", "d"]]))

    def test_ragged_list(self):
        with pytest.raises(InputError, match="cannot convert"):
            check_square_matrix([[1, 2], [3]])

    def test_nan_inf_count_and_first_position(self):
        X = np.zeros((4, 9))[:, :4].copy()
        X[2, 3] = np.nan
        X[3, 0] = np.inf
        X[2, 1] = -np.inf
        with pytest.raises(InputError, match=r"matrix has 3 NaN/Inf entries \(the first at \[2, 1\]: 0-based") as info:
            check_square_matrix(X, source="m.npy")
        _one_line_error(info, "m.npy")


class TestTorch:
    """Tensors as a notebook holds them: with autograd on, or in a float type numpy lacks."""

    @pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
    def test_tensor_requiring_grad_is_read_detached(self, dtype):
        torch = pytest.importorskip("torch")
        X = np.arange(9.0).reshape(3, 3)
        T = torch.tensor(X, dtype=getattr(torch, dtype), requires_grad=True)
        out = check_square_matrix(T)
        assert out.dtype == np.float64
        np.testing.assert_array_equal(out, X)  # small integers: exact in every float type
        assert T.requires_grad and T.dtype == getattr(torch, dtype)  # the caller's tensor is as it was

    def test_bfloat16_values_exact(self):
        torch = pytest.importorskip("torch")
        T = torch.randn(4, 4, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
        np.testing.assert_array_equal(check_square_matrix(T), T.double().numpy())


    @pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
    def test_a_float16_sparse_tensor_is_read_exactly(self, layout):
        """scipy.sparse holds no float16: such a tensor got scipy's own ValueError ("does not support dtype
        float16") where a dense float16 tensor was read."""
        torch = pytest.importorskip("torch")
        T = torch.randn(5, 5, generator=torch.Generator().manual_seed(0)).to(torch.float16)
        S = {"coo": T.to_sparse, "csr": T.to_sparse_csr, "csc": T.to_sparse_csc}[layout]()
        np.testing.assert_array_equal(check_square_matrix(S).toarray(), T.double().numpy())

    @pytest.mark.parametrize("layout", ["coo", "csr", "csc", "bsr", "bf16", "grad"])
    def test_sparse_tensor_is_read_as_scipy_sparse(self, layout):
        """torch's sparse layouts were refused with numpy's "Use Tensor.to_dense() first"; read as the
        scipy sparse matrix of their entries (duplicates summed, never a dense N x N), a dense one's values."""
        torch = pytest.importorskip("torch")
        coo = torch.sparse_coo_tensor(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 0]]), torch.tensor([1.0, 2.0, 3.0, 1.0]),
                                      (3, 3))
        T = {"coo": coo, "csr": coo.to_sparse_csr(), "csc": coo.to_sparse_csc(), "bsr": coo.to_sparse_bsr((1, 1)),
             "bf16": coo.to(torch.bfloat16), "grad": coo.clone().requires_grad_(True)}[layout]
        out = check_square_matrix(T)
        assert isinstance(out, sp.csr_array) and out.nnz == 3
        np.testing.assert_array_equal(out.toarray(), [[0, 1, 0], [0, 0, 2], [4, 0, 0]])

    @staticmethod
    def _gpu_tensor(torch, X, dtype="float32"):
        """``X`` as a tensor that says it is on a GPU (CI has none): numpy refuses it with torch's words for
        a CUDA tensor, and each ``.cpu()`` is counted (``copies``)."""

        class GpuTensor(torch.Tensor):
            copies = 0

            @property
            def device(self):
                return torch.device("cuda", 0)

            def numpy(self, *args, **kwargs):
                raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
                                "tensor to host memory first.")

            def cpu(self, *args, **kwargs):
                GpuTensor.copies += 1
                return self.as_subclass(torch.Tensor).clone()

        return torch.tensor(X, dtype=getattr(torch, dtype)).as_subclass(GpuTensor)

    @pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
    def test_gpu_tensor_is_copied_to_host(self, dtype):
        """A dense tensor on a GPU was refused with torch's "can't convert cuda:0 device type tensor to
        numpy"; it is copied to host memory once, as a sparse one's entries are."""
        torch = pytest.importorskip("torch")
        X = np.arange(9.0).reshape(3, 3)
        T = self._gpu_tensor(torch, X, dtype)
        np.testing.assert_array_equal(check_square_matrix(T, source="X"), X)
        assert type(T).copies == 1

    def test_gpu_tensor_over_the_memory_limit_is_refused_before_its_copy(self):
        torch = pytest.importorskip("torch")
        T = self._gpu_tensor(torch, np.ones((16, 16)))  # float32: 1 KiB on the host, 2 KiB more as float64
        with pytest.raises(ResourceError) as info:
            check_square_matrix(T, source="X", max_memory=2048)
        msg = _one_line_error(info, "X")
        assert "copy in host memory of the 16 x 16 float32 tensor on cuda:0 (and its float64 copy)" in msg
        assert "3,072 B" in msg or "3.0 KiB" in msg
        assert type(T).copies == 0  # refused before anything was copied
        check_square_matrix(T, source="X", max_memory=3072)  # the two copies are the peak: exactly that fits
        assert type(T).copies == 1

    def test_gpu_tensor_given_to_compare_and_fit(self):
        torch = pytest.importorskip("torch")
        from sfapprox import TruncatedSVD, compare

        X = np.random.default_rng(0).standard_normal((8, 8))
        T = self._gpu_tensor(torch, X, "float64")
        result = compare(T, methods=["tsvd"], budget=32)
        assert result.results[0].status == "ok" and result.results[0].rel_error < 1
        fitted = TruncatedSVD(budget=32).fit(T)
        np.testing.assert_allclose(fitted.to_dense(), TruncatedSVD(budget=32).fit(X).to_dense())

    def test_sparse_tensors_scipy_cannot_hold_are_refused_in_one_line(self):
        torch = pytest.importorskip("torch")
        hybrid = torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.ones(2, 3), (3, 3))
        with pytest.raises(InputError) as exc:
            check_square_matrix(hybrid, source="X")
        assert "2 sparse dimensions" in _one_line_error(exc, "X")
        with pytest.raises(InputError, match="2-D"):
            check_square_matrix(torch.zeros(2, 3, 3).to_sparse(), source="X")
        with pytest.raises(InputError, match="sparse input is not accepted"):
            check_square_matrix(hybrid.coalesce().to_dense().to_sparse(), allow_sparse=False)


def _gpu_sparse(monkeypatch, torch, T):
    """``T``, a sparse tensor, made to say it is on a GPU (CI has none; a sparse tensor cannot be
    subclassed as a dense one is): ``device`` says cuda:0 for it and what ``detach`` makes of it, and
    each ``.cpu()`` of those is counted (the list returned) and is a copy."""
    marked, keep, copies = set(), [], []
    base_device, detach, cpu = torch._C.TensorBase.device, torch.Tensor.detach, torch.Tensor.cpu

    def mark(t):
        keep.append(t)  # (ids stay theirs while the test runs)
        marked.add(id(t))
        return t

    monkeypatch.setattr(torch.Tensor, "device", property(
        lambda t: torch.device("cuda", 0) if id(t) in marked else base_device.__get__(t)))
    monkeypatch.setattr(torch.Tensor, "detach", lambda t: mark(detach(t)) if id(t) in marked else detach(t))
    monkeypatch.setattr(torch.Tensor, "cpu", lambda t, *a, **k: (copies.append(t), cpu(t).clone())[1]
                        if id(t) in marked else cpu(t, *a, **k))
    return mark(T), copies


class TestMaxMemoryReachesEveryCopy:
    """``max_memory`` (``--max-memory``) limits every copy the input path makes, before it is made: a
    GPU tensor's copy in host memory and its float64 copy were checked against the default limit (80 %
    of RAM) by compare, fit_matrix, describe and the estimators, a GPU sparse tensor's entries were
    copied unchecked, and a CPU bfloat16 tensor's float64 copy and a BSR matrix's copy were made before
    any check."""

    @staticmethod
    def _refused_before_the_copy(info, T, source="X"):
        msg = _one_line_error(info, source)
        assert "copy in host memory of the 16 x 16 float32 tensor on cuda:0" in msg, msg
        assert type(T).copies == 0

    def test_compare_copies_a_gpu_tensor_within_its_max_memory(self):
        torch = pytest.importorskip("torch")
        from sfapprox import compare

        T = TestTorch._gpu_tensor(torch, np.ones((16, 16)))  # 1 KiB on the host, 2 KiB more as float64
        with pytest.raises(ResourceError) as info:
            compare(T, methods=["tsvd"], budget=32, max_memory=2048)
        self._refused_before_the_copy(info, T)

    def test_an_estimator_copies_a_gpu_tensor_within_its_max_memory(self):
        torch = pytest.importorskip("torch")
        from sfapprox import TruncatedSVD

        T = TestTorch._gpu_tensor(torch, np.ones((16, 16)))
        with pytest.raises(ResourceError) as info:
            TruncatedSVD(budget=32, max_memory=2048).fit(T)
        self._refused_before_the_copy(info, T)
        fitted = TruncatedSVD(n_components=1).fit(np.ones((16, 16))).set_params(max_memory=2048)
        with pytest.raises(ResourceError) as info:
            fitted.frobenius_error(T)  # scoring it reads the matrix as its fit does
        self._refused_before_the_copy(info, T)

    def test_fit_matrix_and_describe_copy_a_gpu_tensor_within_their_max_memory(self):
        torch = pytest.importorskip("torch")
        from sfapprox import FitSettings, fit_matrix
        from sfapprox.describe import describe

        T = TestTorch._gpu_tensor(torch, np.ones((16, 16)))
        with pytest.raises(ResourceError) as info:
            fit_matrix(T, settings=FitSettings(max_memory=2048, device="cpu"))
        self._refused_before_the_copy(info, T)
        with pytest.raises(ResourceError) as info:
            describe(T, max_memory=2048)
        self._refused_before_the_copy(info, T)

    @pytest.mark.parametrize("layout, stored", [("coo", 4), ("csr", 3)])  # (the COO has a repeated entry)
    def test_a_gpu_sparse_tensor_s_entries_are_copied_within_the_limit(self, monkeypatch, layout, stored):
        torch = pytest.importorskip("torch")
        coo = torch.sparse_coo_tensor(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 0]]), torch.tensor([1.0, 2.0, 3.0, 1.0]),
                                      (3, 3))
        T, copies = _gpu_sparse(monkeypatch, torch, coo if layout == "coo" else coo.to_sparse_csr())
        with pytest.raises(ResourceError) as info:
            check_square_matrix(T, source="X", max_memory=64)
        msg = _one_line_error(info, "X")
        assert f"copy in host memory of the 3 x 3 sparse tensor's {stored} stored entries on cuda:0" in msg, msg
        assert not copies  # refused before anything was copied
        out = check_square_matrix(T, source="X", max_memory=2**20)
        assert len(copies) == 1
        np.testing.assert_array_equal(out.toarray(), [[0, 1, 0], [0, 0, 2], [4, 0, 0]])

    def test_compare_copies_a_gpu_sparse_tensor_within_its_max_memory(self, monkeypatch):
        torch = pytest.importorskip("torch")
        from sfapprox import compare

        T, copies = _gpu_sparse(monkeypatch, torch, torch.eye(16).to_sparse())
        with pytest.raises(ResourceError, match="copy in host memory of the 16 x 16 sparse tensor"):
            compare(T, methods=["tsvd"], budget=32, max_memory=256)
        assert not copies

    @pytest.mark.parametrize("layout", ["coo", "bsr", "bfloat16"])
    def test_a_cpu_sparse_tensor_s_conversion_is_checked_before_it_is_made(self, monkeypatch, layout):
        """An uncoalesced COO's coalesce, a BSR's COO and a bfloat16's float64 values were made in host memory
        with no check (only a GPU tensor's copy was checked)."""
        torch = pytest.importorskip("torch")
        n = 64
        rows = torch.arange(n).repeat(2)  # every diagonal entry twice: uncoalesced
        T = torch.sparse_coo_tensor(torch.stack([rows, rows]), torch.ones(2 * n), (n, n))
        if layout == "bsr":
            T = T.coalesce().to_sparse_bsr((2, 2))
        elif layout == "bfloat16":
            T = T.coalesce().to(torch.bfloat16)
        made = []
        for name in ("coalesce", "to_sparse_coo", "to"):
            real = getattr(torch.Tensor, name)
            monkeypatch.setattr(torch.Tensor, name,
                                lambda self, *a, _real=real, _name=name, **k: (made.append(_name), _real(self, *a, **k))[1])
        with pytest.raises(ResourceError, match=r"conversion of the 64 x 64 sparse tensor's \d+ stored values") as info:
            check_square_matrix(T, source="X", max_memory=1024)
        _one_line_error(info, "X")
        assert not made  # refused before anything was converted
        out = check_square_matrix(T, source="X", max_memory=2**20)
        np.testing.assert_array_equal(out.diagonal(), np.full(n, 2.0))  # (the duplicates summed)

    def test_a_bfloat16_tensor_s_float64_copy_is_checked(self):
        torch = pytest.importorskip("torch")
        T = torch.ones(16, 16, dtype=torch.bfloat16)  # 512 B, and 2 KiB as float64
        with pytest.raises(ResourceError, match="float64 copy") as info:
            check_square_matrix(T, source="X", max_memory=2048)
        _one_line_error(info, "X")
        assert check_square_matrix(T, source="X", max_memory=2048 + 512).dtype == np.float64

    def test_a_bsr_matrix_is_not_copied_before_the_memory_check(self, monkeypatch):
        X = sp.bsr_array(np.eye(16), blocksize=(2, 2))
        copied = []
        real_copy = type(X).copy
        monkeypatch.setattr(type(X), "copy", lambda self, *a, **k: (copied.append(1), real_copy(self, *a, **k))[1])
        with pytest.raises(ResourceError, match="sparse 16 x 16 matrix"):
            check_square_matrix(X, source="X", max_memory=256)
        assert not copied
        assert check_square_matrix(X, source="X").nnz == 16

    def test_a_sparse_table_s_dense_copy_is_checked(self):
        """array_of (a kernel's points, a covariance's table) densified a sparse table before any check."""
        from sfapprox._validation import array_of

        with pytest.raises(ResourceError, match=r"^kernel: the dense copy of the points \(16 x 16, sparse\)"):
            array_of(sp.eye(16, format="csr"), "kernel", "the points", max_memory=1024)
        assert array_of(sp.eye(16, format="csr"), "kernel", "the points", max_memory=2048).shape == (16, 16)


class TestSparse:
    def test_canonical_csr_array(self):
        # Duplicates, unsorted indices, an explicit zero.
        coo = sp.coo_matrix(([1.0, 2.0, 3.0, 0.0], ([1, 0, 0, 2], [0, 1, 1, 2])), shape=(3, 3))
        out = check_square_matrix(coo)
        assert isinstance(out, sp.csr_array)
        assert out.dtype == np.float64
        assert out.has_canonical_format
        assert out.nnz == 2  # duplicates summed, explicit zero dropped
        assert out[0, 1] == 5.0

    def test_canonical_csr_copies_only_what_it_must(self):
        """The canonical form of a sparse part (HybridOperator's) or target (metrics): a canonical float64
        CSR is taken as it is; any other is a new array, the caller's left as it was."""
        from sfapprox._validation import canonical_csr

        canonical = sp.csr_array(([1.0, 2.0], ([0, 1], [1, 0])), shape=(2, 2))
        assert np.shares_memory(canonical_csr(canonical).data, canonical.data)
        repeated = sp.csr_array((np.array([1.0, 2.0]), np.array([1, 1]), np.array([0, 2, 2])), shape=(2, 2))
        out = canonical_csr(repeated)
        assert out.has_canonical_format and out.nnz == 1 and out[0, 1] == 3.0 and repeated.nnz == 2

    def test_input_not_modified(self):
        A = sp.csr_array(([1.0, 0.0], ([0, 1], [1, 0])), shape=(2, 2))
        check_square_matrix(A)
        assert A.nnz == 2

    def test_integer_sparse_matrix(self):
        out = check_square_matrix(sp.csc_matrix(np.eye(3, dtype=np.int32)))
        assert isinstance(out, sp.csr_array) and out.dtype == np.float64

    @pytest.mark.parametrize("fmt", ["coo", "csr", "csc"])
    def test_integer_duplicates_summed_in_float(self, fmt):
        # Two int64 entries of 6e18 sum beyond 2^63: summed in int64 they wrap to -6.4e18.
        coo = sp.coo_array((np.array([6 * 10**18] * 2, dtype=np.int64), ([0, 0], [0, 0])), shape=(2, 2))
        X = coo if fmt == "coo" else sp.csr_array((coo.data, coo.col, [0, 2, 2]), shape=(2, 2)) if fmt == "csr" \
            else sp.csc_array((coo.data, coo.row, [0, 2, 2]), shape=(2, 2))
        out = check_square_matrix(X)
        assert out[0, 0] == 1.2e19 and out.nnz == 1 and canonical_csr(X)[0, 0] == 1.2e19
        assert X.dtype == np.int64 and X.nnz == 2  # the caller's matrix is untouched

    @pytest.mark.parametrize("fmt", ["dok_array", "lil_array", "dia_array", "dok_matrix", "lil_matrix", "bsr_array"])
    def test_an_integer_matrix_of_every_sparse_format_is_taken(self, fmt):
        """A dok has no ``.data`` and a lil's is an object array of lists: reading their values as a csr's
        (before the format was looked at) raised AttributeError / ValueError, a traceback."""
        X = getattr(sp, fmt)(np.array([[0, 2], [3, 0]], dtype=np.int64))
        expected = np.array([[0.0, 2.0], [3.0, 0.0]])
        assert np.array_equal(check_square_matrix(X).toarray(), expected)
        assert np.array_equal(canonical_csr(X).toarray(), expected)

    def test_npz_integer_duplicates(self, tmp_path):
        from sfapprox.io import load_matrix

        coo = sp.coo_array((np.array([6 * 10**18] * 2, dtype=np.int64), ([1, 1], [0, 0])), shape=(2, 2))
        sp.save_npz(tmp_path / "d.npz", coo, compressed=False)
        assert load_matrix(tmp_path / "d.npz").to_dense()[1, 0] == 1.2e19

    def test_not_square(self):
        with pytest.raises(InputError, match=r"not square \(2 x 4\)"):
            check_square_matrix(sp.csr_array((2, 4)))

    def test_nan_position(self):
        A = sp.csr_array(([1.0, np.nan, np.inf], ([0, 2, 3], [1, 7, 0])), shape=(8, 8))
        with pytest.raises(InputError, match=r"2 NaN/Inf entries \(the first at \[2, 7\]: 0-based"):
            check_square_matrix(A)

    def test_complex_sparse(self):
        with pytest.raises(InputError, match="complex"):
            check_square_matrix(sp.csr_array(np.eye(2) * 1j))

    def test_allow_sparse_false(self):
        with pytest.raises(InputError, match="sparse input is not accepted"):
            check_square_matrix(sp.eye(2), allow_sparse=False)


class TestMemory:
    def test_estimate(self):
        assert estimate_dense_bytes(1000) == 8_000_000
        assert estimate_dense_bytes(10, np.float32) == 400

    def test_under_limit_passes(self):
        check_memory(100, what="x", limit=100)

    def test_over_limit_raises_with_estimate_and_limit(self):
        with pytest.raises(ResourceError, match="max_memory= if") as info:
            check_memory(3 * 2**30, what="big.mtx: dense matrix", limit=2**30)
        msg = str(info.value)
        assert msg.startswith("big.mtx: dense matrix")
        assert "3.0 GiB" in msg and "1.0 GiB" in msg
        assert isinstance(info.value, MemoryError)

    def test_default_limit_is_fraction_of_ram(self):
        limit = default_memory_limit()
        assert limit is None or limit > 2**20
        if limit is not None:
            with pytest.raises(ResourceError):
                check_memory(limit + 1, what="x")

    def test_format_bytes(self):
        assert format_bytes(512) == "512 B"
        assert format_bytes(1536) == "1.5 KiB"


class TestSparseStructure:
    """Corrupt index arrays are refused before scipy's C++ code trusts them (it would write out of bounds)."""

    def _csr(self, indices, indptr=(0, 1, 2, 3), shape=(3, 3)):
        # The (data, indices, indptr) constructor checks lengths only, not index values.
        return sp.csr_array((np.ones(len(indices)), np.asarray(indices, dtype=np.int32),
                             np.asarray(indptr, dtype=np.int32)), shape=shape)

    def test_csr_column_out_of_range(self):
        with pytest.raises(InputError, match="column index 7 out of range 0..2") as info:
            check_square_matrix(self._csr([0, 7, 2]), source="f.npz")
        _one_line_error(info, "f.npz")

    def test_negative_index(self):
        with pytest.raises(InputError, match="column index -1 out of range"):
            check_square_matrix(self._csr([0, -1, 2]))

    def test_csc_row_out_of_range(self):
        A = sp.csc_matrix((np.ones(3), np.array([0, 9, 2]), np.array([0, 1, 2, 3])), shape=(3, 3))
        with pytest.raises(InputError, match="row index 9 out of range"):
            check_square_matrix(A)

    def test_decreasing_index_pointer(self):
        with pytest.raises(InputError, match="index pointer must start at 0 and never decrease"):
            check_square_matrix(self._csr([0, 1, 2], indptr=(0, 2, 1, 3)))

    def test_an_index_pointer_past_the_entries_counts_them(self):
        """"ends at 3, but only 1 entries are stored": counted as other messages count (formats.counted)."""
        A = self._csr([0], indptr=(0, 1, 1, 1))
        A.indptr[:] = (0, 1, 2, 3)  # after construction: scipy checked it then
        with pytest.raises(InputError, match=r"index pointer ends at 3, but only 1 entry is stored$"):
            check_square_matrix(A)

    def test_coo_out_of_range(self):
        A = sp.coo_array((np.ones(1), (np.array([0]), np.array([0]))), shape=(3, 3))
        A.col[0] = 5  # after construction: scipy checked it then
        with pytest.raises(InputError, match="column index 5 out of range"):
            check_square_matrix(A)

    def test_valid_input_untouched(self):
        A = self._csr([2, 0, 1])
        before = (A.indices.copy(), A.indices.dtype, A.indptr.copy())
        check_sparse_structure(A, source="x")
        check_square_matrix(A)
        assert (A.indices == before[0]).all() and A.indices.dtype == before[1] and (A.indptr == before[2]).all()

    def test_memory_of_the_canonical_copy(self):
        A = sp.coo_array((np.ones(1), (np.array([0]), np.array([0]))), shape=(10**7, 10**7))
        with pytest.raises(ResourceError, match="max_memory= if"):
            check_square_matrix(A, max_memory=2**20)


class TestMagnitude:
    """||X||_F**2 must be a normal float64: beyond, errors and norms are inf, NaN or 0."""

    @pytest.mark.parametrize("scale", [1e150, 1e-150, 1e-300 * 1e150])
    def test_extreme_but_representable_accepted(self, scale):
        X = np.random.default_rng(0).standard_normal((20, 20)) * scale
        np.testing.assert_array_equal(check_square_matrix(X), X)
        np.testing.assert_array_equal(check_square_matrix(sp.csr_array(X)).toarray(), X)

    @pytest.mark.parametrize("value, word", [(1e155, "too large"), (1e300, "too large"), (1e-160, "too small"),
                                             (5e-324, "too small")])
    def test_out_of_range_refused(self, value, word):
        X = np.zeros((3, 3))
        X[1, 2] = value
        for A in (X, sp.csr_array(X)):
            with pytest.raises(InputError, match=word) as info:
                check_square_matrix(A, source="m.csv")
            msg = _one_line_error(info, "m.csv")
            assert f"{value:.3g}" in msg and ("divide" in msg or "multiply" in msg)

    def test_zero_matrix_accepted(self):
        assert not check_square_matrix(np.zeros((4, 4))).any()
        assert check_square_matrix(sp.csr_array((4, 4))).nnz == 0


def test_format_bytes_large():
    assert format_bytes(2.0**61) == "2.0 EiB"
    assert format_bytes(8.0 * (2 * 10**9) ** 2) == "27.8 EiB"
    assert format_bytes(1e30).endswith(" EiB")


@pytest.mark.parametrize("order, dtype", [("F", np.float64), ("C", np.float32)])
def test_a_float64_copy_is_checked_with_the_array_it_is_made_from(order, dtype):
    """A column-major or non-float64 matrix is copied to C-ordered float64 while it is still held: the
    check counts both (it counted the copy alone; a .mat variable peaked at 2.1 arrays against 1)."""
    X = np.asarray(np.random.default_rng(0).random((100, 100)), dtype=dtype, order=order)
    need = X.nbytes + 8 * 100 * 100
    assert check_square_matrix(X, max_memory=need).flags.c_contiguous
    with pytest.raises(ResourceError, match=r"float64 copy of the 100 x 100 matrix \(besides the"):
        check_square_matrix(X, max_memory=need - 1)
    C = np.ascontiguousarray(X, dtype=np.float64)
    assert check_square_matrix(C, max_memory=C.nbytes) is C  # no copy: nothing more to hold


def test_a_dense_matrix_is_checked_finite_without_a_mask():
    """The finiteness check is the sum of squares (one pass, no temporary); the N x N mask of np.isfinite
    (an eighth of an array, at the peak of a copy) is made only to say where a NaN or Inf is."""
    import tracemalloc

    X = np.random.default_rng(1).random((300, 300))
    tracemalloc.start()
    try:
        check_square_matrix(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 0.05 * X.nbytes
    X[7, 9], X[8, 2] = np.inf, np.nan
    with pytest.raises(InputError, match=r"2 NaN/Inf entries \(the first at \[7, 9\]: 0-based"):
        check_square_matrix(X)
    with pytest.raises(InputError, match="values too large"):
        check_square_matrix(np.full((3, 3), 1e200))


def test_a_dense_matrixs_nan_is_found_and_counted_without_a_whole_mask():
    """Where the sum of squares found a NaN/Inf, an N x N mask of np.isfinite (and np.nonzero's of its
    negation) was made to name the first: 900 MB at N = 30,000, past the memory limit the user set.
    Blocks of rows (first_nonfinite, count_nonfinite) find the same entry and count."""
    import tracemalloc

    X = np.random.default_rng(2).random((1000, 1000))
    X[701, 5], X[701, 3], X[999, 999], X[750, 0] = np.nan, np.inf, -np.inf, np.nan
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match=r"matrix has 4 NaN/Inf entries \(the first at \[701, 3\]: 0-based"):
            check_square_matrix(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < X.size // 4  # a block's mask, not the whole bool mask of X.size bytes


@pytest.mark.filterwarnings("error")
def test_a_signalling_nan_is_one_error_and_no_warning():
    """Cast to float64, a float32 signalling NaN (other programs write them) set the invalid flag: numpy's
    "invalid value encountered in cast" came before the one-line error."""
    X = np.ones((4, 4), dtype=np.float32)
    X.view(np.uint32)[2, 3] = 0x7FA00000  # a signalling NaN
    with pytest.raises(InputError, match=r"matrix has 1 NaN/Inf entry \(the first at \[2, 3\]: 0-based"):
        check_square_matrix(X, source="m.npy")


def test_a_need_just_over_the_limit_is_said_in_bytes_where_its_rounding_would_match_the_limit():
    """"needs about 6.9 MiB, over the memory limit of 6.9 MiB" (7,280,000 B against 7,235,174 B)."""
    from sfapprox import ResourceError
    from sfapprox._validation import check_memory

    with pytest.raises(ResourceError, match=r"needs about 7,280,000 B, over the memory limit of 7,235,174 B"):
        check_memory(7_280_000, what="x", limit=7_235_174)
    with pytest.raises(ResourceError, match=r"needs about 9.5 MiB, over the memory limit of 6.9 MiB"):
        check_memory(10_000_000, what="x", limit=7_235_174)


def _refusals(tmp_path) -> list:
    """Each refusal (or note) that named an option in both spellings, or a reader's wrong one: a callable
    that raises it or returns its text, and what it says in each spelling (Python's, the command line's)."""
    import torch
    from PIL import Image

    from sfapprox import NMF, ChordSF, TruncatedSVD, compare, save_factors
    from sfapprox._validation import LIBRARY_WORKING_SET
    from sfapprox.budget import SFConfig
    from sfapprox.chord import check_butterfly_size
    from sfapprox.sf.methods import structure_reason
    from sfapprox.factors import check_results_folder
    from sfapprox.io import load_matrix
    from sfapprox.sources import KernelMatrix

    (tmp_path / "empty.net").write_text("% no network here\n")
    (tmp_path / "one.net").write_text("*Vertices 3\n*Edges\n1 2\n2 3\n")
    Image.fromarray(np.zeros((4, 6), dtype=np.uint8)).save(tmp_path / "wide.png")
    (tmp_path / "m.tsvd.h5").write_text("")
    kernel = KernelMatrix(np.random.default_rng(5).standard_normal((300, 3)), bandwidth=1.0)
    X = np.random.default_rng(0).random((40, 40))
    operator = TruncatedSVD(n_components=2).fit(X).operator_
    columns_only = 3 * 8 * 40 * 40 + LIBRARY_WORKING_SET  # Monarch's in-memory fit is over it, from columns not
    return [
        (lambda: check_memory(10**9, what="the work", limit=10**6), "raise the limit with max_memory= if",
         "raise the limit with --max-memory if"),
        (lambda: check_butterfly_size(12), "(resize= for images", "(--resize for images"),
        (lambda: ChordSF(support="butterfly", n_factors=3, device="cpu").fit(np.eye(16)),
         "got n_factors=3; leave n_factors= out", "got --factors 3; leave --factors out"),
        (lambda: ChordSF(support="butterfly", base=3, device="cpu").fit(np.eye(16)),
         "base=3 does not apply", "--base 3 does not apply"),
        (lambda: check_results_folder(tmp_path, "m", ["tsvd"]), "use force=True to overwrite", "use --force to overwrite"),
        (lambda: compare(kernel, ["rsvd", "sparse", "tsvd"], budget=0.1, max_memory=1, device="cpu"),
         "raise the limit with max_memory= to at least", "raise the limit with --max-memory to at least"),
        (lambda: load_matrix(tmp_path / "empty.net"), "pass format=", "pass --format"),
        (lambda: " ".join(load_matrix(tmp_path / "one.net", two_mode="bipartite").notes),
         "two_mode='bipartite' loads it", "--two-mode bipartite loads it"),
        (lambda: load_matrix(tmp_path / "wide.png"), "use square='crop' (center crop) or square='resize'",
         "use --square crop (center crop) or --square resize"),
        # these said the command line's option to a Python caller too
        (lambda: save_factors(tmp_path / "m.tsvd.h5", operator, force=False), "(use force=True to overwrite)",
         "(use --force to overwrite)"),
        (lambda: NMF(max_memory=200_000).fit(kernel), "work from its columns (compare's methods=)",
         "work from its columns (compare's --methods)"),
        (lambda: [n for n in compare(X, ["monarch"], max_memory=columns_only, device="cpu").notes if "column" in n][0],
         "a larger max_memory= fits in memory", "a larger --max-memory fits in memory"),
        (lambda: structure_reason(3000, SFConfig(2, 12, 13, 468_000, "chord"), SFConfig(2, 10, 13, 390_000, "chord"),
                                  60.0, evaluation_seconds=1.8), "; time_limit=0 or a longer limit fits them all",
         "; --time-limit 0 or a longer limit fits them all"),
        *([] if torch.cuda.is_available() else [(lambda: ChordSF(device="cuda").fit(np.eye(4)),
                                    "use device='cpu' or device='auto'", "use --device cpu or --device auto")]),
    ]


def test_messages_name_an_option_as_their_reader_passes_it(tmp_path):
    """Messages named the command line's option to a Python caller ('leave n_factors out (--factors)',
    '--resize for images'), or both spellings to each ('--max-memory (max_memory=)', '--force (force=True)',
    "square='resize' (or --square crop|resize)"). Each reader now gets its own (sfapprox._errors.parameter)."""
    from sfapprox._errors import spelled_for

    def said(make) -> str:
        try:
            text = make()
        except Exception as exc:  # noqa: BLE001  (the refusal is the text looked at)
            text = str(exc)
        return " ".join(text.replace(str(tmp_path), "DIR").split())

    for make, api, cli in _refusals(tmp_path):
        text = said(make)
        assert api in text and "--" not in text, text
        with spelled_for("cli"):
            text = said(make)
        assert cli in text and not re.search(r"\b[a-z_]+=", text), text


class TestRefusalsSayWhatToDo:
    """Odd but legitimate inputs refused with the fix in the same line: each message said only what
    was wrong (or, for a file name and a LoadedMatrix, something else: "object dtype", "dtype <U5")."""

    @pytest.mark.parametrize("shape, fix", [
        ((4, 4, 1), r"drop its axes of length 1 \(numpy.squeeze\)"),  # an image's channel axis
        ((1, 3, 3), r"drop its axes of length 1"),
        ((16,), r"if it holds a 4 x 4 matrix row by row, reshape it \(X.reshape\(4, 4\)\)"),  # flattened
        ((5,), r"give a square 2-D array"),
        ((2, 2, 2), r"give a square 2-D array"),
    ])
    def test_an_array_not_2d_is_told_its_reshape(self, shape, fix):
        with pytest.raises(InputError, match=f"must be 2-D, got a {len(shape)}-D array of shape .*; {fix}") as info:
            check_square_matrix(np.zeros(shape))
        _one_line_error(info)

    def test_an_empty_matrix_says_what_is_needed(self):
        with pytest.raises(InputError, match=r"empty \(0 x 0\); there is nothing to approximate: give a matrix of "
                                             r"at least 1 x 1"):
            check_square_matrix(np.zeros((0, 0)))

    @pytest.mark.parametrize("X", [np.array([[1.0, np.nan], [0.0, 1.0]]), sp.csr_array(np.array([[np.inf, 0], [0, 1.0]]))])
    def test_non_finite_entries_say_how_to_remove_them(self, X):
        with pytest.raises(InputError, match=r"NaN/Inf entr(y|ies) .*; replace (it|them) \(numpy.nan_to_num\) or remove"):
            check_square_matrix(X)

    @pytest.mark.parametrize("path", ["m.npy", __import__("pathlib").Path("m.npy")])
    def test_a_file_name_is_not_read_as_a_string_array(self, path):
        with pytest.raises(InputError, match=r"^X: got the file name 'm.npy', not a matrix; read it first "
                                             r"\(sfapprox.load_matrix\(path\).matrix\)") as info:
            check_square_matrix(path, source="X")
        _one_line_error(info, "X")

    def test_a_loaded_matrix_is_told_to_pass_its_array(self, tmp_path):
        from sfapprox import TruncatedSVD, load_matrix

        np.save(tmp_path / "m.npy", np.eye(3))
        loaded = load_matrix(tmp_path / "m.npy")
        with pytest.raises(InputError, match=r"^X: a LoadedMatrix \(m\), not its array; pass its .matrix"):
            TruncatedSVD(n_components=1).fit(loaded)
        TruncatedSVD(n_components=1).fit(loaded.matrix)  # what the message says works

    def test_a_masked_array_with_masked_entries_is_refused(self):
        X = np.ma.masked_array(np.eye(3) + 1, mask=np.eye(3, dtype=bool))
        with pytest.raises(InputError, match=r"a masked array with 3 masked entries; fill them first \(\.filled\(0\)\), or pass its \.data"):
            check_square_matrix(X)
        one = np.ma.masked_array(np.eye(3), mask=np.eye(3, dtype=bool) & (np.arange(3) == 0))  # in the singular
        with pytest.raises(InputError, match=r"a masked array with 1 masked entry; fill it first \(\.filled\(0\)\), or pass its \.data"):
            check_square_matrix(one)
        # nothing masked: its values are the matrix
        np.testing.assert_array_equal(check_square_matrix(np.ma.masked_array(np.eye(3))), np.eye(3))
        np.testing.assert_array_equal(check_square_matrix(X.filled(0)), np.ones((3, 3)) - np.eye(3) + 0)


def test_an_arrays_nan_refusal_says_its_indexes_are_numpys():
    """An array has no lines: "row 1, col 2; 0-based" beside the text readers' 1-based "line L, column C"
    left a reader to guess; the position is numpy's index ``[i, j]``, said to be 0-based, as numpy's.
    One entry is counted in the singular; thousands are separated as tables write them."""
    X = np.ones((3, 3))
    X[1, 2] = np.nan
    with pytest.raises(InputError, match=r"matrix has 1 NaN/Inf entry \(the first at \[1, 2\]: 0-based, as numpy "
                                         r"indexes\)"):
        check_square_matrix(X, source="m.npy")
    S = sp.csr_array(np.full((40, 40), np.inf))
    with pytest.raises(InputError, match=r"matrix has 1,600 NaN/Inf entries \(the first at \[0, 0\]: 0-based"):
        check_square_matrix(S, source="m.npz")


def test_a_sparse_arrays_memory_refusal_separates_thousands():
    """"sparse 40 x 40 matrix with 1600 stored entries" beside tables printing 1,600."""
    S = sp.csr_array(np.ones((40, 40)))
    with pytest.raises(ResourceError, match=r"sparse 40 x 40 matrix with 1,600 stored entries needs"):
        check_square_matrix(S, source="m.npz", max_memory=1_000)


class TestPhysicalMemoryElsewhere:
    """The default limit (80 % of RAM) off Linux: Windows has no ``os.sysconf``."""

    def test_windows_reads_its_ram_from_global_memory_status(self, monkeypatch):
        import ctypes
        import sys
        import types

        from sfapprox import _validation

        def global_memory_status_ex(ref):
            ref._obj.ullTotalPhys = 16 << 30  # what Windows fills in
            return 1

        monkeypatch.delattr("os.sysconf", raising=False)
        monkeypatch.setattr(sys, "platform", "win32")
        monkeypatch.setattr(ctypes, "windll", types.SimpleNamespace(
            kernel32=types.SimpleNamespace(GlobalMemoryStatusEx=global_memory_status_ex)), raising=False)
        # (before: None, so no limit at all on Windows and nothing said)
        assert default_memory_limit() == int(0.8 * (16 << 30))
        assert _validation.physical_memory() == 16 << 30

    def test_an_unknown_ram_is_no_limit_and_said_once(self, monkeypatch):
        import sys

        from sfapprox import _validation

        monkeypatch.delattr("os.sysconf", raising=False)
        monkeypatch.setattr(sys, "platform", "emscripten")
        monkeypatch.setattr(_validation, "_warned_no_limit", False, raising=False)
        with pytest.warns(RuntimeWarning, match=r"no memory limit applies; give one \(--max-memory"):
            assert default_memory_limit() is None
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert default_memory_limit() is None  # every load asks: the warning is given once


def test_the_default_memory_limit_is_80_percent_of_a_containers_limit(fake_cgroup, monkeypatch):
    """docker run --memory 4g on a 64 GB host: the default planned for 51 GB (80% of the host's RAM), and the
    OOM killer ended the run with nothing said or saved."""
    from sfapprox import _resources

    monkeypatch.setattr(_resources, "host_memory", lambda: 64 << 30)
    fake_cgroup("0::/system.slice/docker-abc.scope\n", {"system.slice/docker-abc.scope/memory.max": str(4 << 30)})
    assert default_memory_limit() == int(0.8 * (4 << 30))
    fake_cgroup("0::/system.slice/docker-abc.scope\n", {"system.slice/docker-abc.scope/memory.max": "max"})
    assert default_memory_limit() == int(0.8 * (64 << 30))


@pytest.mark.parametrize("n, said", [(1, "X is 1 x 1: it applies to a vector or a matrix of 1 row, got shape 2"),
                                     (1024, "X is 1,024 x 1,024: it applies to a vector or a matrix of 1,024 rows, "
                                            "got shape 2")])
def test_the_order_is_said_as_other_messages_say_counts(n, said):
    """"1024 x 1024", "of 1 rows": N thousands separated, its rows counted (formats.counted), as the tables
    write counts."""
    from sfapprox._errors import ParameterError
    from sfapprox._validation import check_operand

    with pytest.raises(ParameterError, match=f"^{re.escape(said)}$"):
        check_operand(np.ones(2), n, owner="X")
    if n > 1:
        with pytest.raises(ResourceError, match=r"^array: float64 copy of the 1,024 x 1,024 matrix \(besides"):
            check_square_matrix(np.eye(n, dtype=np.float32), max_memory=10**6)


class TestMaskedAndOtherContainers:
    """A masked array's mask is kept in every array an entry reads, not only in the matrix: np.asarray keeps
    the values under it, so a point table, an operand or a scored approximation used them as data."""

    MASKED = np.ma.masked_array(np.arange(6.0).reshape(3, 2), mask=[[1, 0], [0, 0], [0, 0]])

    def test_masked_points_are_refused_by_a_kernel_matrix(self):
        from sfapprox.sources import KernelMatrix

        with pytest.raises(InputError, match=r"^kernel: the points, a masked array with 1 masked entry; fill it") as info:
            KernelMatrix(self.MASKED, bandwidth=1.0)
        assert "X." not in str(info.value)  # the advice named a variable X, which here are the points
        assert KernelMatrix(np.ma.masked_array(self.MASKED.data), bandwidth=1.0).n == 3  # nothing masked: its values

    def test_a_masked_operand_of_a_product_is_refused(self):
        from sfapprox._errors import ParameterError
        from sfapprox.operators import SparseOperator

        op = SparseOperator(sp.eye(3, format="csr"))
        with pytest.raises(ParameterError, match=r"the operand: a masked array with 1 masked entry; fill it first "
                                                 r"\(\.filled\(0\)\), or pass its \.data"):
            op @ np.ma.masked_array(np.ones(3), mask=[1, 0, 0])
        np.testing.assert_array_equal(op @ np.ma.masked_array(np.ones(3)), np.ones(3))

    def test_a_linear_operator_is_not_said_to_have_object_dtype(self):
        from scipy.sparse.linalg import aslinearoperator

        with pytest.raises(InputError, match=r"^X: a LinearOperator is read by its products only .*X @ numpy.eye"):
            check_square_matrix(aslinearoperator(np.eye(3)), source="X")

    @pytest.mark.parametrize("value, word, seen", [("1e400", "too large", r"1e\+400"), ("1e-400", "too small", "1e-400")])
    def test_long_double_entries_past_float64_are_said_so_not_nan_or_zero(self, value, word, seen):
        """1e400 became inf in the float64 copy ("has 9 NaN/Inf entries", none in the caller's array);
        1e-400 became 0, and the zero matrix was fitted without a word."""
        X = np.full((3, 3), np.longdouble(value))
        with pytest.raises(InputError, match=rf"^X: values {word} for float64 \(largest \|entry\| {seen}\)"):
            check_square_matrix(X, source="X")
        np.testing.assert_array_equal(check_square_matrix(np.eye(3, dtype=np.longdouble)), np.eye(3))


def test_the_float64_range_check_of_a_longdouble_matrix_makes_only_its_mask():
    """``np.abs(arr[np.isfinite(arr)])`` made two 16-byte-an-entry copies besides the mask: a 16 MB
    longdouble array took 32 MB more than check_memory counted."""
    import tracemalloc

    from sfapprox._validation import _check_float64_range

    arr = np.ones((1000, 1000), dtype=np.longdouble)
    arr[0, 0] = np.inf
    tracemalloc.start()
    try:
        _check_float64_range([arr], "X")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * arr.size  # the 1-byte mask, not copies of the values


@pytest.mark.parametrize("fmt", ["coo", "csr", "dok", "dia", "lil"])
@pytest.mark.parametrize("value, word, seen", [("1e400", "too large", r"1e\+400"), ("1e-400", "too small", "1e-400")])
def test_sparse_long_double_entries_past_float64_are_said_so_as_dense_ones_are(fmt, value, word, seen):
    """The sparse path skipped the range check: a finite 1e400 was "1 NaN/Inf entry" (after scipy's
    overflow warning), and 1e-400 the zero matrix (a lil still was: its COO copy passed the values
    through float64)."""
    X = sp.coo_array((np.array([np.longdouble(value)]), ([0], [1])), shape=(3, 3)).asformat(fmt)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InputError, match=rf"^X: values {word} for float64 \(largest \|entry\| {seen}\)"):
            check_square_matrix(X, source="X")


@pytest.mark.parametrize("fmt", ["dok", "lil", "dia"])
def test_the_stored_values_of_a_sparse_matrix_are_read_without_its_coo_copy(fmt):
    """The range check read a dok's, lil's and dia's values from their COO copy: index arrays of 8 bytes
    an entry each (and a copy of the values) past what check_memory counted; now only the values, in
    their own dtype (a lil's came back through float64)."""
    import tracemalloc

    from sfapprox._validation import _stored_values

    n = 200_000
    X = sp.diags_array(np.full(n, np.longdouble("1e-400")), format=fmt) if fmt == "dia" else \
        sp.coo_array((np.full(n, np.longdouble("1e-400")), (np.arange(n), np.arange(n))), shape=(n, n)).asformat(fmt)
    tracemalloc.start()
    try:
        parts = _stored_values(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    values = np.concatenate(parts)
    assert values.dtype == np.longdouble and values.size == n and (values == np.longdouble("1e-400")).all()
    assert peak < 16 * n + 100_000  # the values alone (a dia's: views of its diagonals)


def test_a_dia_matrix_s_values_outside_the_matrix_are_not_range_checked():
    """A dia's ``.data`` holds each diagonal padded to the width: what lies outside the matrix is no entry."""
    data = np.array([[1.0, 2.0, np.longdouble("1e400")]], dtype=np.longdouble)  # diagonal -1 of a 3 x 3: 2 entries
    X = sp.dia_array((data, [-1]), shape=(3, 3))
    np.testing.assert_array_equal(check_square_matrix(X).toarray(), [[0, 0, 0], [1, 0, 0], [0, 2, 0]])


def test_a_subnormal_long_double_matrix_is_refused_in_a_float64_one_s_words():
    """A longdouble matrix whose largest entry is 1e-310 said "too small for float64"; a float64 one of
    the same values "||X||_F**2 underflows": the same matrix, one message."""
    messages = []
    for dtype in (np.float64, np.longdouble):
        with pytest.raises(InputError) as info:
            check_square_matrix(np.full((3, 3), 1e-310, dtype=dtype), source="X")
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "underflows" in messages[1]
