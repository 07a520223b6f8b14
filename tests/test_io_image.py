"""Tests for the image reader (Pillow): grayscale in [0, 1], squaring, resizing, gradient."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from sfapprox._errors import InputError, ResourceError
from sfapprox.io import load_matrix


def input_error(path, match, **kwargs) -> str:
    with pytest.raises(InputError, match=match) as info:
        load_matrix(path, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(str(path)), msg
    return msg


def save(path, array, mode=None):
    img = Image.fromarray(array) if mode is None else Image.fromarray(array).convert(mode)
    img.save(path)
    return path


GRAY = (np.arange(64, dtype=np.uint8).reshape(8, 8) * 4)


class TestImage:
    def test_png_8bit(self, tmp_path):
        m = load_matrix(save(tmp_path / "g.png", GRAY))
        assert (m.format, m.n, m.name, m.is_sparse) == ("image", 8, "g", False)
        np.testing.assert_allclose(m.matrix, GRAY / 255.0)
        assert m.matrix.flags.c_contiguous and m.notes == []

    def test_png_16bit(self, tmp_path):
        data = (np.arange(16, dtype=np.uint16).reshape(4, 4) * 4000)
        m = load_matrix(save(tmp_path / "w.png", data))
        np.testing.assert_allclose(m.matrix, data / 65535.0)

    def test_rgb_converted(self, tmp_path):
        rgb = np.zeros((6, 6, 3), dtype=np.uint8)
        rgb[..., 0] = 255
        m = load_matrix(save(tmp_path / "c.png", rgb))
        assert m.matrix.max() <= 1 and any("RGB image converted to grayscale" in n for n in m.notes)

    @pytest.mark.parametrize("ext", ["pgm", "bmp", "tif", "gif", "jpg", "webp"])
    def test_other_formats(self, tmp_path, ext):
        m = load_matrix(save(tmp_path / f"g.{ext}", GRAY))
        assert m.n == 8 and 0 <= m.matrix.min() and m.matrix.max() <= 1

    def test_not_square(self, tmp_path):
        p = save(tmp_path / "r.png", np.zeros((4, 6), dtype=np.uint8))
        # width and height named (it said "6 x 4": rows x columns everywhere else, a 4 x 6 matrix here)
        input_error(p, r"image is 6 pixels wide and 4 high \(a 4 x 6 matrix\), not square; use square='crop' "
                       r"\(center crop\) or square='resize'$")

    def test_crop(self, tmp_path):
        data = np.zeros((4, 8), dtype=np.uint8)
        data[:, 2:6] = 255
        m = load_matrix(save(tmp_path / "r.png", data), square="crop")
        np.testing.assert_array_equal(m.matrix, np.ones((4, 4)))
        assert "center-cropped 8x4 (width x height) -> 4x4" in m.notes

    def test_square_resize_to_min_side(self, tmp_path):
        m = load_matrix(save(tmp_path / "r.png", np.full((4, 8), 128, dtype=np.uint8)), square="resize")
        assert m.n == 4 and np.allclose(m.matrix, 128 / 255, atol=1e-6)

    def test_resize(self, tmp_path):
        m = load_matrix(save(tmp_path / "g.png", GRAY), resize=5)
        assert m.n == 5 and 0 <= m.matrix.min() and m.matrix.max() <= 1
        assert "resized 8x8 -> 5x5 (LANCZOS)" in m.notes
        # resize alone also squares a rectangular image
        assert load_matrix(save(tmp_path / "r.png", np.zeros((4, 6), dtype=np.uint8)), resize=3).n == 3

    def test_gradient(self, tmp_path):
        data = np.zeros((6, 6), dtype=np.uint8)
        data[:, 3:] = 255  # vertical edge
        m = load_matrix(save(tmp_path / "e.png", data), gradient=True)
        gy, gx = np.gradient(data / 255.0)
        np.testing.assert_allclose(m.matrix, np.hypot(gx, gy))
        assert any("gradient magnitude" in n for n in m.notes)

    def test_unreadable(self, tmp_path):
        p = tmp_path / "x.png"
        p.write_bytes(b"not an image at all")
        input_error(p, "cannot identify image file")

    def test_truncated(self, tmp_path):
        p = save(tmp_path / "t.png", np.random.default_rng(0).integers(0, 255, (64, 64), dtype=np.uint8))
        p.write_bytes(p.read_bytes()[:200])
        input_error(p, "cannot read image|cannot identify")

    def test_decompression_bomb(self, tmp_path, monkeypatch):
        p = save(tmp_path / "b.png", np.zeros((64, 64), dtype=np.uint8))
        monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)
        input_error(p, "decompression bomb")

    def test_memory_from_header(self, tmp_path):
        p = save(tmp_path / "m.png", np.zeros((64, 64), dtype=np.uint8))
        with pytest.raises(ResourceError):
            load_matrix(p, max_memory=1000)


class TestHardening:
    """Inputs Pillow would misread."""

    def test_image_decoders_limited_to_image_formats(self, tmp_path):
        p = tmp_path / "x.png"
        p.write_bytes(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n")
        input_error(p, "cannot identify image file .*PNG, JPEG")


@pytest.mark.parametrize("shape, said", [((2, 1), r"1 pixel wide and 2 high \(a 2 x 1 matrix\)"),
                                         ((1, 1200), r"1,200 pixels wide and 1 high \(a 1 x 1,200 matrix\)")])
def test_a_not_square_image_is_measured_as_other_messages_count(tmp_path, shape, said):
    """"image is 1 pixels wide", "1200 pixels wide": counted (formats.counted), as other messages count."""
    input_error(save(tmp_path / "r.png", np.zeros(shape, dtype=np.uint8)), rf"image is {said}, not square; ")
