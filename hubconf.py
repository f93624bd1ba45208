"""torch.hub entry points of a pfzoo checkout, one per model family (``rbm``, ``dbm``, ``ising``, ...):

    model = torch.hub.load("/path/to/pfzoo", "rbm", pretrained="rbm-digits", source="local")

is the model ``pfzoo.zoo.pretrained("rbm-digits")`` gives, read from this checkout's ``models/``;
``torch.hub.load(..., "rbm", num_visible=64, num_hidden=20, source="local")`` builds an untrained one. The code is
the ``pfzoo`` this Python imports (the checkout's, unless another pfzoo was imported first)."""

from pathlib import Path as _Path

from pfzoo.zoo.hub import entrypoints as _entrypoints

dependencies = ["torch"]

globals().update(_entrypoints(zoo_dir=_Path(__file__).resolve().parent / "models"))
