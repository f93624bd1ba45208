import importlib
import pathlib

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from PIL import Image
from scipy import stats

from pfzoo.data import (
    DataSplits,
    PatchTransform,
    embedded_images,
    fit_patch_transform,
    patches,
    read_image,
    sample_patches,
    split_patches,
)

patches_module = importlib.import_module("pfzoo.data.patches")  # the attribute pfzoo.data.patches is the function
CONF = pathlib.Path(__file__).resolve().parents[2] / "conf" / "dataset"
CODE = 10**6  # image k's pixel (r, c) holds k * CODE + r * W + c


def _coded_images(shapes: list[tuple[int, int]]) -> list[torch.Tensor]:
    """Images whose pixel values name the image and the position, so a patch reveals where it came from."""
    return [k * CODE + torch.arange(h * w, dtype=torch.float64).reshape(h, w) for k, (h, w) in enumerate(shapes)]


def _decode(raw: torch.Tensor, shapes: list[tuple[int, int]], patch_size: int) -> tuple[torch.Tensor, ...]:
    """Image index, top and left of each patch; asserts every patch is exactly that window of that image."""
    which = torch.div(raw[:, 0], CODE, rounding_mode="floor").long()
    widths = torch.tensor([w for _, w in shapes])[which]
    local = (raw[:, 0] - which * CODE).long()
    tops, lefts = local // widths, local % widths
    rows, cols = torch.meshgrid(torch.arange(patch_size), torch.arange(patch_size), indexing="ij")
    expected = raw[:, :1] + (rows.reshape(-1) * widths[:, None] + cols.reshape(-1)).double()
    assert torch.equal(raw, expected)
    return which, tops, lefts


def _test_block_area(shapes: list[tuple[int, int]], patch_size: int = 16) -> int:
    """Pixels in the usable odd-row, odd-column blocks of side 2 * patch_size (the test split's area)."""
    size, area = 2 * patch_size, 0
    for h, w in shapes:
        rows = sum(min(size, h - t) for i, t in enumerate(range(0, h, size)) if i % 2 and h - t >= patch_size)
        cols = sum(min(size, w - s) for j, s in enumerate(range(0, w, size)) if j % 2 and w - s >= patch_size)
        area += rows * cols
    return area


def _assert_whitened_exactly(z: torch.Tensor, atol: float) -> None:
    z = z.double()
    assert z.mean(dim=0).abs().max() < atol
    assert torch.allclose(z.T @ z / len(z), torch.eye(z.shape[1], dtype=torch.float64), rtol=0, atol=atol)


def _assert_test_near_identity(test: torch.Tensor, shapes: list[tuple[int, int]]) -> None:
    """Test covariance within 5 sd of the identity, but not equal to it (the transform was not refitted).

    Overlapping patches are strongly correlated, so the sd of a covariance entry uses the number of
    non-overlapping patches the test blocks hold, n_eff = area / P, not the number of draws:
    sd_ij = sqrt(E[z_i^2 z_j^2] / n_eff). Over seeds 0..5 the largest deviation was 3 sd.
    """
    z = test.double()
    deviation = (z.T @ z / len(z) - torch.eye(z.shape[1], dtype=torch.float64)).abs()
    sd = ((z**2).T @ (z**2) / len(z) / (_test_block_area(shapes) / 256)).sqrt()
    assert (deviation <= 5 * sd).all(), (deviation / sd).max()
    assert deviation.max() > 1e-3


# sample_patches


SHAPES = [(40, 50), (33, 70), (16, 16)]


def test_sample_patches_are_windows_at_valid_positions():
    raw = sample_patches(_coded_images(SHAPES), 5000, 16, generator=torch.Generator().manual_seed(0))
    assert raw.shape == (5000, 256) and raw.dtype == torch.float64
    which, tops, lefts = _decode(raw, SHAPES, 16)
    heights, widths = (torch.tensor(s)[which] for s in zip(*SHAPES))
    assert (tops >= 0).all() and (tops <= heights - 16).all()
    assert (lefts >= 0).all() and (lefts <= widths - 16).all()


def test_sample_patches_uniform_over_all_positions():
    counts = [(h - 7) * (w - 7) for h, w in SHAPES]  # patch_size 8: 33*43 + 26*63 + 9*9 = 3138 positions
    raw = sample_patches(_coded_images(SHAPES), 60000, 8, generator=torch.Generator().manual_seed(1))
    which, tops, lefts = _decode(raw, SHAPES, 8)
    offsets = np.cumsum([0] + counts[:-1])
    index = torch.tensor(offsets)[which] + tops * torch.tensor([w - 7 for _, w in SHAPES])[which] + lefts
    observed = torch.bincount(index, minlength=sum(counts)).numpy()
    assert len(observed) == sum(counts) and (observed > 0).all()  # every position is reachable (~19 draws each)
    assert stats.chisquare(observed).pvalue > 1e-3
    per_image = torch.bincount(which, minlength=3).numpy()
    assert stats.chisquare(per_image, 60000 * np.array(counts) / sum(counts)).pvalue > 1e-3


def test_sample_patches_reproducible_and_accepts_arrays():
    images = [np.asarray(image) for image in embedded_images()]
    first = sample_patches(images, 300, generator=torch.Generator().manual_seed(5))
    tensors = [torch.from_numpy(image) for image in images]
    again = sample_patches(tensors, 300, generator=torch.Generator().manual_seed(5))
    other = sample_patches(images, 300, generator=torch.Generator().manual_seed(6))
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert sample_patches(images, 0, generator=torch.Generator()).shape == (0, 256)


@pytest.mark.parametrize(
    "images, kwargs, match",
    [
        ([], {}, "images must be a non-empty sequence"),
        ([torch.zeros(20, 20), torch.zeros(20)], {}, r"images\[1\] must be 2-D .* got shape \(20,\)"),
        ([torch.zeros(20, 20), torch.zeros(15, 40)], {}, r"images\[1\] must be 2-D with at least 16 rows and columns"),
        ([torch.zeros(20, 20)], dict(num_patches=-1), "num_patches must be an integer >= 0"),
        ([torch.zeros(20, 20)], dict(num_patches=2.0), "num_patches must be an integer"),
        ([torch.zeros(20, 20)], dict(patch_size=0), "patch_size must be an integer >= 1"),
    ],
)
def test_sample_patches_rejects_bad_arguments(images, kwargs, match):
    with pytest.raises(ValueError, match=match):
        sample_patches(images, **{"num_patches": 10, **kwargs})


# split_patches


def test_split_patches_come_from_disjoint_blocks():
    shapes = [(100, 130), (70, 90), (20, 200)]  # the last image is too short for a test block (needs 24 rows)
    train, test = split_patches(_coded_images(shapes), 8000, 3000, 8, generator=torch.Generator().manual_seed(2))
    assert train.shape == (8000, 64) and test.shape == (3000, 64)
    assert not torch.isin(test, train).any()  # no pixel is shared
    for raw, is_test in ((train, False), (test, True)):
        which, tops, lefts = _decode(raw, shapes, 8)
        assert (tops // 16 == (tops + 7) // 16).all() and (lefts // 16 == (lefts + 7) // 16).all()  # inside one block
        odd = (tops // 16 % 2 == 1) & (lefts // 16 % 2 == 1)
        assert (odd == is_test).all()
        assert set(which.tolist()) == ({0, 1} if is_test else {0, 1, 2})


def test_split_patches_rejects_images_without_a_test_block():
    with pytest.raises(ValueError, match="too small for a test block: need an image with at least 48 rows and columns"):
        split_patches([torch.zeros(47, 500), torch.zeros(500, 40)], 10, 10, 16, generator=torch.Generator())


# PatchTransform and fit_patch_transform


@pytest.fixture(scope="module")
def synthetic() -> tuple[torch.Tensor, torch.Tensor]:
    """Raw 4x4 patches whose log(x + 1) is Gaussian with distinct variances 8, 4, 2, 1, 0.5, ... and a rotation."""
    generator = torch.Generator().manual_seed(3)
    rotation, _ = torch.linalg.qr(torch.randn(16, 16, generator=generator, dtype=torch.float64))
    sds = 2.0 ** (1.5 - torch.arange(16) / 2)
    log_pixels = 3.0 + torch.randn(20000, 16, generator=generator, dtype=torch.float64) * sds
    return torch.expm1(log_pixels @ rotation.T), log_pixels @ rotation.T


def test_fit_matches_eigendecomposition_and_whitens_exactly(synthetic):
    raw, log_pixels = synthetic
    transform = fit_patch_transform(raw, 5)
    assert transform.num_components == 5 and transform.num_pixels == 16 and transform.offset == 1.0
    components = transform.components
    assert components.shape == (5, 16) and transform.scales.shape == (5,) and transform.mean.shape == (16,)
    assert torch.allclose(components @ components.T, torch.eye(5, dtype=torch.float64), rtol=0, atol=1e-12)
    variances = transform.scales**-2
    assert (variances[:-1] > variances[1:]).all()  # sorted by decreasing variance
    centred = log_pixels.numpy() - log_pixels.numpy().mean(axis=0)
    eigenvalues, eigenvectors = np.linalg.eigh(centred.T @ centred / len(centred))
    assert np.allclose(variances.numpy(), eigenvalues[::-1][:5], rtol=1e-10)
    assert np.allclose(np.abs(components.numpy() @ eigenvectors[:, ::-1][:, :5]), np.eye(5), atol=1e-8)
    assert np.allclose(variances.numpy(), 2.0 ** (3 - np.arange(5)), rtol=0.05)  # the generating variances
    largest = components.gather(1, components.abs().argmax(dim=1, keepdim=True))
    assert (largest > 0).all()  # the sign convention
    assert torch.allclose(transform.mean, log_pixels.mean(dim=0), rtol=0, atol=1e-12)
    _assert_whitened_exactly(transform.apply(raw), atol=1e-10)


def test_apply_is_log_subtract_project_whiten(synthetic):
    raw, _ = synthetic
    transform = fit_patch_transform(raw[:1000], 3, offset=2.5)
    new = raw[1000:1100]
    expected = ((torch.log(new + 2.5) - transform.mean) @ transform.components.T) * transform.scales
    z = transform.apply(new)
    assert z.dtype == torch.float64 and z.shape == (100, 3)
    assert torch.allclose(z, expected, rtol=1e-12, atol=1e-12)
    assert torch.allclose(transform.apply(new.float()), expected, rtol=1e-5, atol=1e-5)  # float32 input accepted


def test_state_dict_round_trip_gives_identical_output(synthetic, tmp_path):
    raw, _ = synthetic
    transform = fit_patch_transform(raw, 6)
    state = transform.state_dict()
    assert set(state) == {"mean", "components", "scales", "offset"}
    assert all(type(v) is torch.Tensor and v.dtype == torch.float64 for v in state.values())
    torch.save(state, tmp_path / "transform.pt")
    loaded = PatchTransform.from_state_dict(torch.load(tmp_path / "transform.pt", weights_only=True))
    assert loaded.offset == transform.offset
    for name in ("mean", "components", "scales"):
        assert torch.equal(getattr(loaded, name), getattr(transform, name))
    assert torch.equal(loaded.apply(raw), transform.apply(raw))


def test_transform_from_float32_state_is_stored_as_float64(synthetic):
    state = {k: v.float() for k, v in fit_patch_transform(synthetic[0], 2).state_dict().items()}
    loaded = PatchTransform.from_state_dict(state)
    assert loaded.mean.dtype == loaded.components.dtype == loaded.scales.dtype == torch.float64


@pytest.mark.parametrize(
    "raw, kwargs, match",
    [
        (torch.ones(50, 16), dict(num_components=0), r"num_components must be an integer in \[1, 16\]"),
        (torch.ones(50, 16), dict(num_components=17), r"num_components must be an integer in \[1, 16\]"),
        (torch.rand(5, 16), dict(num_components=5), "must hold more than num_components = 5 patches, got 5"),
        (torch.rand(50), {}, r"raw_patches must be a torch.Tensor of shape \[N, P\], got shape \(50,\)"),
        (np.ones((50, 16)), {}, r"raw_patches must be a torch.Tensor of shape \[N, P\], got ndarray"),
        (torch.rand(50, 16) * 9 - 2, dict(num_components=2), r"raw_patches must exceed -offset = -1.0"),
        (torch.full((50, 16), float("nan")), dict(num_components=2), "raw_patches must be finite"),
        (torch.rand(50, 16), dict(num_components=2, offset=-1.0), "offset must be a finite number >= 0"),
        (torch.rand(50, 1).repeat(1, 16), dict(num_components=2), "span fewer than num_components = 2 directions"),
    ],
)
def test_fit_rejects_bad_input(raw, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_patch_transform(raw, **kwargs)


def test_transform_validates_tensors_and_input(synthetic):
    transform = fit_patch_transform(synthetic[0], 4)
    with pytest.raises(ValueError, match=r"raw_patches must be a torch.Tensor of shape \[N, 16\], got shape \(3, 15\)"):
        transform.apply(torch.ones(3, 15))
    with pytest.raises(ValueError, match="raw_patches must exceed -offset"):
        transform.apply(-torch.ones(3, 16))
    with pytest.raises(ValueError, match=r"components must have shape \[M, 16\]"):
        PatchTransform(transform.mean, transform.components[:, :15], transform.scales)
    with pytest.raises(ValueError, match=r"scales must have shape \[4\]"):
        PatchTransform(transform.mean, transform.components, transform.scales[:3])
    with pytest.raises(ValueError, match="mean must be a floating-point torch.Tensor"):
        PatchTransform(transform.mean.long(), transform.components, transform.scales)
    with pytest.raises(ValueError, match=r"state must have the keys \['components', 'mean', 'offset', 'scales'\]"):
        PatchTransform.from_state_dict({"mean": transform.mean})


# the dataset


@pytest.fixture(scope="module")
def embedded() -> DataSplits:
    return patches()  # the defaults: 50000 / 10000 patches of the embedded photos, 36 components


def test_embedded_defaults(embedded):
    assert embedded.name == "patches" and embedded.image_shape is None and embedded.valid is None
    assert embedded.train.shape == (50000, 36) and embedded.test.shape == (10000, 36)
    assert embedded.train.dtype == embedded.test.dtype == torch.float32
    transform = embedded.transform
    assert isinstance(transform, PatchTransform)
    assert transform.num_components == 36 and transform.num_pixels == 256


def test_train_is_whitened_and_test_uses_the_train_transform(embedded):
    _assert_whitened_exactly(embedded.train, atol=1e-5)  # exact up to float32 rounding
    _assert_test_near_identity(embedded.test, [(427, 640), (427, 640)])
    raw_train, raw_test = split_patches(embedded_images(), 50000, 10000, generator=torch.Generator().manual_seed(0))
    refit = fit_patch_transform(raw_train, 36)  # fitted on train only
    for name in ("mean", "components", "scales"):
        assert torch.equal(getattr(refit, name), getattr(embedded.transform, name))
    assert torch.equal(embedded.test, embedded.transform.apply(raw_test).float())
    assert torch.equal(embedded.train, embedded.transform.apply(raw_train).float())


def test_reproducible_per_seed_and_independent_of_global_rng():
    torch.manual_seed(1)
    a = patches(num_train=2000, num_test=500, seed=4)
    torch.manual_seed(2)
    torch.rand(10)
    b = patches(num_train=2000, num_test=500, seed=4)
    c = patches(num_train=2000, num_test=500, seed=5)
    assert torch.equal(a.train, b.train) and torch.equal(a.test, b.test)
    assert not torch.equal(a.train, c.train) and not torch.equal(a.test, c.test)


def test_sizes_and_components_follow_arguments():
    data = patches(num_train=1500, num_test=300, patch_size=8, num_components=10, seed=1)
    assert data.train.shape == (1500, 10) and data.test.shape == (300, 10)
    assert data.transform.num_pixels == 64
    _assert_whitened_exactly(data.train, atol=1e-5)


def _fake_root(root: pathlib.Path) -> list[pathlib.Path]:
    """A data root with a van Hateren .iml, a 16-bit TIFF in a subfolder and files that are not images."""
    folder = root / "natural_images"
    (folder / "more").mkdir(parents=True)
    photo = embedded_images()[0]
    vanhateren = np.tile(np.round(photo * 16), (3, 3))[:1024, :1536]  # photo-like 12-bit values
    (folder / "b.iml").write_bytes(vanhateren.astype(">u2").tobytes())
    Image.fromarray(np.round(embedded_images()[1] * 200).astype(np.uint16)).save(folder / "more" / "a.TIFF")
    (folder / "notes.txt").write_text("not an image")
    (folder / "c.png").write_bytes(b"")
    return [folder / "b.iml", folder / "more" / "a.TIFF"]  # sorted by path


def test_vanhateren_source_reads_every_image_under_the_folder(tmp_path, monkeypatch):
    paths = _fake_root(tmp_path)
    data = patches("vanhateren", tmp_path, num_train=3000, num_test=800, seed=2)
    raw_train, raw_test = split_patches(
        [read_image(p) for p in paths], 3000, 800, generator=torch.Generator().manual_seed(2)
    )
    assert torch.equal(data.test, fit_patch_transform(raw_train).apply(raw_test).float())
    _assert_whitened_exactly(data.train, atol=1e-5)
    monkeypatch.setenv("PFZOO_DATA", str(tmp_path))
    assert torch.equal(patches("vanhateren", None, num_train=3000, num_test=800, seed=2).train, data.train)


def test_vanhateren_source_without_images_names_the_folder(tmp_path):
    (tmp_path / "natural_images").mkdir()
    (tmp_path / "natural_images" / "readme.txt").write_text("")
    with pytest.raises(FileNotFoundError) as info:
        patches("vanhateren", tmp_path)
    message = str(info.value)
    assert str(tmp_path / "natural_images") in message
    assert "*.iml, *.imc, *.tif, *.tiff" in message and "data.root=" in message and "PFZOO_DATA" in message


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(source="mnist"), "source must be one of 'embedded', 'vanhateren', got 'mnist'"),
        (dict(num_train=36), "num_train must be an integer > num_components = 36"),
        (dict(num_test=0), "num_test must be an integer >= 1"),
        (dict(patch_size=0), "patch_size must be an integer >= 1"),
        (dict(patch_size=4, num_components=17), r"num_components must be at most patch_size \*\* 2 = 16"),
        (dict(num_components=0), "num_components must be an integer >= 1"),
    ],
)
def test_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        patches(**kwargs)


def test_config_instantiates_embedded_and_vanhateren(tmp_path):
    cfg = OmegaConf.create({"data": {"root": str(tmp_path)}})
    cfg.dataset = OmegaConf.load(CONF / "patches.yaml")
    assert cfg.dataset._target_ == "pfzoo.data.patches" and cfg.dataset.source == "embedded"
    assert cfg.dataset.num_train == 50000 and cfg.dataset.num_components == 36
    data = instantiate(cfg.dataset, num_train=1000, num_test=200)
    assert data.name == "patches" and data.train.shape == (1000, 36)
    _fake_root(tmp_path)
    data = instantiate(cfg.dataset, source="vanhateren", num_train=1000, num_test=200)
    assert data.test.shape == (200, 36)
    assert patches_module.LOG_OFFSET == data.transform.offset == 1.0


@pytest.mark.data
def test_real_vanhateren_patches(shared_data_root):
    data = patches("vanhateren", shared_data_root, num_train=20000, num_test=5000)
    assert data.train.shape == (20000, 36) and data.test.shape == (5000, 36)
    _assert_whitened_exactly(data.train, atol=1e-5)
    _assert_test_near_identity(data.test, [(1024, 1536)])
