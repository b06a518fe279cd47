"""Model zoo: the networks of the published MXNet benchmark tables.

The networks are the ones measured by MXNet's ``benchmark_score.py`` tables at
commit 0a03417 (Dec 2016, ``example/image-classification/symbol/``), not
look-alikes: e.g. "Alexnet" is the original 96-256-384-384-256 net with LRN
(50.84M params), not Gluon's 61.1M variant.

This module is a cheap registry: it does NOT import mxnet (nor pytest).  Only
:func:`build_symbol` imports mxnet, lazily.  The declared ``params``/``gmacs``
are the figures measured by ``python -m pytest_mxperf.zoo.count`` (which walks
the graph) and are pinned by ``tests/test_zoo.py``.

Counting conventions: ``params`` = learnable parameters, including BatchNorm
gamma/beta, excluding BatchNorm running mean/var (auxiliary states);
``gmacs`` = forward multiply-accumulates of Convolution and FullyConnected
layers for one image, in units of 1e9.
"""

import importlib
from dataclasses import asdict, dataclass
from typing import Dict, Optional, Tuple

__all__ = [
    "ModelSpec",
    "MODELS",
    "UnknownModelError",
    "get_model",
    "build_symbol",
    "model_names",
]


class UnknownModelError(ValueError):
    """Raised by :func:`get_model` for a name that is not in :data:`MODELS`."""


@dataclass(frozen=True)
class ModelSpec:
    """One network.  ``macs`` is exact (int); ``gmacs`` = macs / 1e9."""

    name: str
    table_column: Optional[str]
    input_shape: Tuple[int, int, int]
    num_classes: int
    params: int
    macs: int
    builder: str
    description: str

    @property
    def gmacs(self) -> float:
        """Declared forward MACs per image (conv + FC), in units of 1e9."""
        return self.macs / 1e9

    @property
    def mparams(self) -> float:
        """Declared parameter count in millions."""
        return self.params / 1e6

    @property
    def flops_per_image(self) -> float:
        """Forward FLOPs per image, counting a multiply-accumulate as 2 FLOPs."""
        return 2.0 * self.gmacs * 1e9

    @property
    def data_shape(self) -> Tuple[int, int, int, int]:
        """Shape of a batch of one image, ``(1, C, H, W)``."""
        return (1,) + tuple(self.input_shape)

    def to_dict(self) -> dict:
        """JSON-able record including the derived ``gmacs``/``flops_per_image``."""
        d = asdict(self)
        d["input_shape"] = list(self.input_shape)
        d["gmacs"] = self.gmacs
        d["flops_per_image"] = self.flops_per_image
        return d


_PKG = "pytest_mxperf.zoo"

MODELS: Dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="alexnet",
            table_column="Alexnet",
            input_shape=(3, 224, 224),
            num_classes=1000,
            params=50844008,
            macs=1009945728,
            builder=_PKG + ".alexnet:get_symbol",
            description="Original AlexNet (96-256-384-384-256 convs, LRN, no groups, "
                        "FC 4096-4096-1000), as benchmark_score at MXNet 0a03417",
        ),
        ModelSpec(
            name="vgg11",
            table_column="VGG",
            input_shape=(3, 224, 224),
            num_classes=1000,
            params=132863336,
            macs=7609090048,
            builder=_PKG + ".gluon_nets:get_vgg11",
            description="VGG-11 (config A), no batch norm, as benchmark_score at "
                        "MXNet 0a03417 (built with Gluon vgg11, random weights)",
        ),
        ModelSpec(
            name="inception-bn",
            table_column="Inception-BN",
            input_shape=(3, 224, 224),
            num_classes=1000,
            params=11295240,
            macs=1987204096,
            builder=_PKG + ".inception_bn:get_symbol",
            description="BN-Inception (3a-3c, 4a-4e, 5a, 5b) at 224x224, as "
                        "symbols/inception-bn.py at MXNet 0a03417",
        ),
        ModelSpec(
            name="inception-v3",
            table_column="Inception-v3",
            input_shape=(3, 299, 299),
            num_classes=1000,
            params=23834568,
            macs=5713216096,
            builder=_PKG + ".gluon_nets:get_inception_v3",
            description="Standard Inception-v3 at 299x299 (built with Gluon "
                        "inception_v3, random weights)",
        ),
        ModelSpec(
            name="resnet50_v2",
            table_column="Resnet 50",
            input_shape=(3, 224, 224),
            num_classes=1000,
            params=25549486,
            macs=4089184256,
            builder=_PKG + ".gluon_nets:get_resnet50_v2",
            description="Pre-activation (v2) ResNet-50, bottleneck units 3,4,6,3 "
                        "(built with Gluon resnet50_v2, random weights)",
        ),
        ModelSpec(
            name="resnet152_v2",
            table_column="Resnet 152",
            input_shape=(3, 224, 224),
            num_classes=1000,
            params=60185262,
            macs=11513626624,
            builder=_PKG + ".gluon_nets:get_resnet152_v2",
            description="Pre-activation (v2) ResNet-152, bottleneck units 3,8,36,3 "
                        "(built with Gluon resnet152_v2, random weights)",
        ),
        ModelSpec(
            name="lenet",
            table_column=None,
            input_shape=(1, 28, 28),
            num_classes=10,
            params=431080,
            macs=2293000,
            builder=_PKG + ".mnist_nets:get_lenet",
            description="LeNet (conv20 5x5 tanh pool, conv50 5x5 tanh pool, FC500 tanh, "
                        "FC10) on 1x28x28, as MXNet symbols/lenet.py",
        ),
        ModelSpec(
            name="mlp",
            table_column=None,
            input_shape=(1, 28, 28),
            num_classes=10,
            params=109386,
            macs=109184,
            builder=_PKG + ".mnist_nets:get_mlp",
            description="MLP (flatten 784, FC128 relu, FC64 relu, FC10) on 1x28x28, "
                        "as MXNet symbols/mlp.py",
        ),
    )
}


def model_names():
    """The known model names, in registry order."""
    return list(MODELS)


def get_model(name: str) -> ModelSpec:
    """Return the :class:`ModelSpec` called ``name`` or raise UnknownModelError."""
    try:
        return MODELS[name]
    except (KeyError, TypeError):
        raise UnknownModelError(
            "unknown model %r; known models: %s" % (name, ", ".join(MODELS))
        ) from None


def _resolve_builder(builder: str):
    module_name, _, func_name = builder.partition(":")
    if not module_name or not func_name:
        raise ValueError("builder must be 'module:function', got %r" % (builder,))
    return getattr(importlib.import_module(module_name), func_name)


#: networks run in float16 as MXNet's ``example/image-classification`` symbol definitions
#: do it (``dtype='float16'``); its ``benchmark_score.py`` skips AlexNet and Inception-BN
#: for float16 ("Model definition ... does not support float16"), and so does this suite.
FLOAT16_MODELS: Tuple[str, ...] = ("vgg11", "inception-v3", "resnet50_v2", "resnet152_v2")


def build_symbol(name: str, num_classes: Optional[int] = None, dtype: str = "float32"):
    """Build model ``name`` as an ``mx.sym.Symbol`` ending in
    ``SoftmaxOutput(name='softmax')`` (label ``softmax_label``).  Imports mxnet
    (its import-time DeprecationWarnings silenced).  Weights are not created:
    bind it (e.g. ``mx.mod.Module``) and initialise randomly.

    ``dtype="float16"`` (``FLOAT16_MODELS`` only) is MXNet's own float16 form of these
    networks: the float32 input is cast to float16 before the first layer, the weights are
    float16 (BatchNorm's parameters and statistics stay float32, as Gluon's ``cast`` keeps
    them) and the last layer's output is cast back to float32 before the softmax."""
    import warnings

    spec = get_model(name)
    if dtype not in ("float32", "float16"):
        raise ValueError(f"dtype must be float32 or float16, not {dtype!r}")
    if dtype == "float16" and name not in FLOAT16_MODELS:
        raise ValueError(f"{name} has no float16 definition (float16 networks: {', '.join(FLOAT16_MODELS)})")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import mxnet as mx
    classes = spec.num_classes if num_classes is None else int(num_classes)
    if dtype == "float16":
        body = _resolve_builder(spec.builder)(num_classes=classes, dtype="float16")
        body = mx.sym.Cast(body, dtype="float32", name="output_fp32")
    else:
        body = _resolve_builder(spec.builder)(num_classes=classes)
    return mx.sym.SoftmaxOutput(data=body, name="softmax")
