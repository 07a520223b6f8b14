"""Image reader (Pillow): grayscale float64 in [0, 1].

8-bit images are divided by 255, 16-bit by 65535; colour images go through
Pillow's ``convert("L")`` (ITU-R 601-2 luma).  Non-square images need
``square="crop"`` (centre crop to the shorter side), ``square="resize"``
(resample to the shorter side, changing the aspect ratio) or ``resize=N``.
"""

from __future__ import annotations

import warnings

import numpy as np
from PIL import Image, UnidentifiedImageError

from .._errors import parameter
from ..formats import counted, shape_text
from .._validation import check_memory
from ._common import Options, ReadResult, Source, one_line

_SIXTEEN_BIT = {"I;16", "I;16L", "I;16B", "I;16N"}

#: Pillow decoders tried, matching the registered extensions.  Pillow picks a
#: decoder from the file's *content*, not its name: without this list a file
#: named ``x.png`` holding PostScript would be rendered by Ghostscript (EPS).
#: (Multi-picture camera JPEGs come through the "JPEG" decoder.)
PILLOW_FORMATS = ("PNG", "JPEG", "PPM", "BMP", "TIFF", "GIF", "WEBP")


def _to_gray(img: Image.Image, notes: list[str]) -> np.ndarray:
    """Grayscale float64 in [0, 1] from any Pillow mode."""
    mode = img.mode
    if mode in _SIXTEEN_BIT:
        return np.asarray(img, dtype=np.float64) / 65535.0
    if mode == "I":
        arr = np.asarray(img, dtype=np.float64)
        # Pillow opens 16-bit PNGs as 32-bit "I"; larger values need their own max.
        scale = 65535.0 if arr.size == 0 or arr.max() <= 65535 else float(arr.max())
        notes.append(f"32-bit integer image scaled by 1/{scale:g}")
        return arr / scale
    if mode == "F":
        notes.append("floating-point image kept as stored (not rescaled)")
        return np.asarray(img, dtype=np.float64)
    if mode != "L":
        notes.append(f"{mode} image converted to grayscale (Pillow convert('L'))")
        img = img.convert("L")
    return np.asarray(img, dtype=np.float64) / 255.0


def _resample(arr: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """LANCZOS resampling in float32 (mode "F"), clipped back to [0, 1]."""
    img = Image.fromarray(arr.astype(np.float32))  # float32 -> mode "F"
    out = np.asarray(img.resize(size, Image.Resampling.LANCZOS), dtype=np.float64)
    # LANCZOS overshoots at sharp edges; keep the documented [0, 1] range.
    return np.clip(out, 0.0, 1.0)


def _shape_square(src: Source, arr: np.ndarray, opts: Options, notes: list[str], reading: dict) -> np.ndarray:
    """``arr`` made square as asked; what was done in ``reading`` (``square`` and ``resize``: None where
    nothing was, as for an image already square or of that size)."""
    h, w = arr.shape
    reading.update(square=opts.square if h != w else None, resize=None)
    if h != w and opts.square is None and opts.resize is None:
        raise src.fail(
            # width and height said as such: "6 x 4" read as the matrix's rows x columns everywhere else
            f"image is {counted(w, 'pixel')} wide and {h:,} high (a {h:,} x {w:,} matrix), not square",
            f"use {parameter('square', 'crop')} (center crop) or {parameter('square', 'resize')}",
        )
    if h != w and opts.square == "crop":
        side = min(h, w)
        top, left = (h - side) // 2, (w - side) // 2
        arr = arr[top : top + side, left : left + side]
        notes.append(f"center-cropped {w}x{h} (width x height) -> {side}x{side}")
    elif h != w and opts.square == "resize":
        side = min(h, w)
        arr = _resample(arr, (side, side))
        notes.append(f"resized {w}x{h} (width x height) -> {side}x{side} (LANCZOS; aspect ratio changed)")
    if opts.resize is not None and arr.shape != (opts.resize, opts.resize):
        h, w = arr.shape
        check_memory(8 * opts.resize**2, what=f"{src.display}: resized image", limit=opts.max_memory_bytes)
        arr = _resample(arr, (opts.resize, opts.resize))
        notes.append(f"resized {w}x{h} -> {opts.resize}x{opts.resize} (LANCZOS)")
        reading["resize"] = opts.resize
    return arr


def read_image(src: Source, opts: Options) -> ReadResult:
    """Reader for format "image"."""
    notes: list[str] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(src.file_arg(), formats=PILLOW_FORMATS) as img:
                w, h = img.size
                # Header size first: refuse before decoding the pixels.
                check_memory(2 * 8 * w * h, what=f"{src.display}: image of {w:,} x {h:,} pixels (width x height)", limit=opts.max_memory_bytes)
                if getattr(img, "n_frames", 1) > 1:
                    notes.append(f"image has {img.n_frames} frames; loaded the first")
                img.load()
                arr = _to_gray(img, notes)
    except Image.DecompressionBombError as exc:
        raise src.fail(
            f"image refused as a possible decompression bomb ({one_line(exc)})",
            "shrink it with an image tool first",
        ) from None
    except UnidentifiedImageError:
        raise src.fail(
            f"cannot identify image file (unreadable, or not one of {', '.join(PILLOW_FORMATS)})"
        ) from None
    except (OSError, ValueError, SyntaxError, EOFError) as exc:  # truncated/corrupt images
        raise src.fail(f"cannot read image ({one_line(exc) or type(exc).__name__})") from None
    if arr.ndim != 2:
        raise src.fail(f"image decoded to shape {shape_text(arr.shape)}, expected a 2-D grayscale array")
    reading: dict = {}
    arr = _shape_square(src, arr, opts, notes, reading)
    reading["gradient"] = bool(opts.gradient)
    if opts.gradient:
        gy, gx = np.gradient(arr)
        arr = np.sqrt(gx * gx + gy * gy)
        notes.append("gradient magnitude sqrt(gx² + gy²) (numpy.gradient)")
    return ReadResult(np.ascontiguousarray(arr), "image", notes, reading=reading)
