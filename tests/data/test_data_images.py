import pathlib
import struct

import numpy as np
import pytest
from PIL import Image
from sklearn.datasets import load_sample_images

from pfzoo.data import embedded_images, read_image

VANHATEREN_BYTES = 1024 * 1536 * 2


def _write_tiff(path: pathlib.Path, array: np.ndarray, byteorder: str = "<", rows_per_strip: int | None = None) -> None:
    """Write a baseline uncompressed 16-bit grey TIFF (TIFF 6.0: header, one IFD, strip arrays, strips)."""
    height, width = array.shape
    rows_per_strip = rows_per_strip or height
    pixels = array.astype(f"{byteorder}u2")
    strips = [pixels[top : top + rows_per_strip].tobytes() for top in range(0, height, rows_per_strip)]
    n, num_tags = len(strips), 9
    arrays_at = 8 + 2 + 12 * num_tags + 4  # strip offsets then strip byte counts, 4 bytes each
    offsets = np.cumsum([arrays_at + 8 * n] + [len(s) for s in strips[:-1]]).tolist()

    def entry(tag: int, kind: int, count: int, value: int) -> bytes:  # kind 3 = SHORT, 4 = LONG
        inline = struct.pack(byteorder + "HI"[kind - 3], value).ljust(4, b"\0")  # a value, or an array's offset
        return struct.pack(f"{byteorder}HHI", tag, kind, count) + inline

    entries = [
        entry(256, 4, 1, width),
        entry(257, 4, 1, height),
        entry(258, 3, 1, 16),  # bits per sample
        entry(259, 3, 1, 1),  # no compression
        entry(262, 3, 1, 1),  # black is zero
        entry(273, 4, n, offsets[0] if n == 1 else arrays_at),
        entry(277, 3, 1, 1),  # samples per pixel
        entry(278, 4, 1, rows_per_strip),
        entry(279, 4, n, len(strips[0]) if n == 1 else arrays_at + 4 * n),
    ]
    header = (b"II" if byteorder == "<" else b"MM") + struct.pack(f"{byteorder}HI", 42, 8)
    ifd = struct.pack(f"{byteorder}H", num_tags) + b"".join(entries) + struct.pack(f"{byteorder}I", 0)
    arrays = struct.pack(f"{byteorder}{2 * n}I", *offsets, *map(len, strips))
    path.write_bytes(header + ifd + arrays + b"".join(strips))


def _uncompressed_tiff_pixels(path: pathlib.Path) -> np.ndarray:
    """Decode an uncompressed 16-bit grey TIFF straight from its first IFD (independent of Pillow)."""
    data = path.read_bytes()
    order = "<" if data[:2] == b"II" else ">"
    (ifd,) = struct.unpack_from(f"{order}I", data, 4)
    (count,) = struct.unpack_from(f"{order}H", data, ifd)
    tags = {}
    for i in range(count):
        tag, kind, n, raw = struct.unpack_from(f"{order}HHI4s", data, ifd + 2 + 12 * i)
        code = {3: "H", 4: "I"}.get(kind)
        if code is not None:
            source, at = (raw, 0) if n * struct.calcsize(code) <= 4 else (data, struct.unpack(f"{order}I", raw)[0])
            tags[tag] = struct.unpack_from(f"{order}{n}{code}", source, at)
    assert tags[258] == (16,) and tags[259] == (1,) and tags[277] == (1,)
    strips = b"".join(data[o : o + c] for o, c in zip(tags[273], tags[279]))
    return np.frombuffer(strips, dtype=f"{order}u2").reshape(tags[257][0], tags[256][0])


@pytest.mark.parametrize("name", ["image.iml", "image.imc", "IMAGE.IML"])
def test_vanhateren_round_trip_is_exact(tmp_path, name):
    pixels = np.random.default_rng(0).integers(0, 2**16, size=(1024, 1536), dtype=np.uint16)
    pixels[0, :3] = [0x0102, 0xFF00, 0x00FF]  # byte order matters for these
    path = tmp_path / name
    path.write_bytes(pixels.astype(">u2").tobytes())
    image = read_image(path)
    assert image.dtype == np.float64 and image.shape == (1024, 1536)
    assert np.array_equal(image, pixels)
    assert image[0, 0] == 258.0  # big-endian 0x01 0x02


@pytest.mark.parametrize("size", [0, VANHATEREN_BYTES - 2, VANHATEREN_BYTES + 1, 2 * VANHATEREN_BYTES])
def test_vanhateren_wrong_size_raises_naming_file(tmp_path, size):
    path = tmp_path / "short.imc"
    path.write_bytes(bytes(size))
    with pytest.raises(ValueError, match=f"1024 x 1536 big-endian uint16 pixels \\(3145728 bytes\\), got {size} bytes"):
        read_image(path)
    with pytest.raises(ValueError, match=str(path)):
        read_image(path)


@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize("rows_per_strip", [None, 1, 7])
def test_uncompressed_tiff_round_trip_is_exact(tmp_path, byteorder, rows_per_strip):
    pixels = np.random.default_rng(1).integers(0, 2**16, size=(37, 53))
    path = tmp_path / "grey.tiff"
    _write_tiff(path, pixels, byteorder, rows_per_strip)
    assert np.array_equal(_uncompressed_tiff_pixels(path), pixels)  # the helper writer follows the format
    image = read_image(path)
    assert image.dtype == np.float64 and image.shape == (37, 53)
    assert np.array_equal(image, pixels)


@pytest.mark.parametrize(
    "mode, dtype, compression",
    [("I;16", np.uint16, "tiff_lzw"), ("I;16", np.uint16, "tiff_adobe_deflate"), ("L", np.uint8, None)],
)
def test_pillow_written_tiffs_including_compressed(tmp_path, mode, dtype, compression):
    pixels = np.random.default_rng(2).integers(0, np.iinfo(dtype).max + 1, size=(20, 31)).astype(dtype)
    path = tmp_path / "photo.TIF"
    Image.fromarray(pixels).save(path, compression=compression)
    with Image.open(path) as check:
        assert check.mode == mode
    assert np.array_equal(read_image(path), pixels)


def test_colour_tiff_rejected(tmp_path):
    path = tmp_path / "colour.tif"
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(path)
    with pytest.raises(ValueError, match="single-channel \\(grey\\) TIFF, got Pillow mode 'RGB'") as info:
        read_image(path)
    assert str(path) in str(info.value)


def test_unknown_suffix_and_missing_file(tmp_path):
    path = tmp_path / "image.png"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=r"path must end in one of \.iml, \.imc, \.tif, \.tiff .*image\.png"):
        read_image(path)
    for name in ("missing.iml", "missing.tiff"):
        with pytest.raises(FileNotFoundError):
            read_image(tmp_path / name)


def test_embedded_images_are_luminance_of_sklearn_photos():
    images = embedded_images()
    photos = load_sample_images().images
    assert len(images) == 2
    for grey, rgb in zip(images, photos):
        assert grey.dtype == np.float64 and grey.shape == (427, 640)
        expected = 0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]
        assert np.allclose(grey, expected, rtol=0, atol=1e-9)
        pillow = np.asarray(Image.fromarray(rgb).convert("L"), dtype=np.float64)  # Pillow rounds to integers
        assert np.abs(grey - pillow).max() <= 1.0
        assert 0.0 <= grey.min() and grey.max() <= 255.0
    assert any((grey == 0).any() for grey in images)  # black pixels: why the patch log needs an offset


@pytest.mark.data
def test_real_vanhateren_tiff(shared_data_root):
    path = shared_data_root / "natural_images" / "vanhateren_tvlearn_ecml2022.tiff"
    image = read_image(path)
    assert image.dtype == np.float64 and image.shape == (1024, 1536)
    assert np.array_equal(image, _uncompressed_tiff_pixels(path))
    assert np.array_equal(image, np.round(image)) and 0 < image.min() and image.max() < 2**16
    assert image.std() > 0.1 * image.mean()  # a photograph, not a constant frame
