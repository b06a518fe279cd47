"""Networks taken from ``mx.gluon.model_zoo.vision`` (random weights, never
pretrained) and converted to symbols by calling the block on ``mx.sym.var('data')``.

Each block gets a fixed prefix (e.g. ``resnet50_v2_``) so the argument names of
the symbol do not depend on how many Gluon blocks the process created before.
BatchNorm running mean/var become auxiliary states of the symbol (not arguments).
mxnet is imported lazily.
"""


def _to_symbol(factory_name, prefix, num_classes, dtype="float32"):
    """The block called on ``mx.sym.var('data')``; with ``dtype='float16'`` the block is
    cast to float16 first (Gluon keeps BatchNorm's parameters float32) and called on the
    data cast to float16, and the output stays float16 (the caller casts it back)."""
    import mxnet as mx

    factory = getattr(mx.gluon.model_zoo.vision, factory_name)
    net = factory(pretrained=False, classes=num_classes, prefix=prefix)
    data = mx.sym.var("data")
    if dtype == "float16":
        net.cast("float16")
        data = mx.sym.Cast(data, dtype="float16", name="data_fp16")
    return net(data)


def get_vgg11(num_classes=1000, dtype="float32"):
    """VGG-11 (config A: 1,1,2,2,2 convs of 64,128,256,512,512), no batch norm."""
    return _to_symbol("vgg11", "vgg11_", num_classes, dtype)


def get_inception_v3(num_classes=1000, dtype="float32"):
    """Inception-v3 (Szegedy et al. 2015), 299x299 input."""
    return _to_symbol("inception_v3", "inception_v3_", num_classes, dtype)


def get_resnet50_v2(num_classes=1000, dtype="float32"):
    """Pre-activation ResNet-50 (bottleneck units 3,4,6,3)."""
    return _to_symbol("resnet50_v2", "resnet50_v2_", num_classes, dtype)


def get_resnet152_v2(num_classes=1000, dtype="float32"):
    """Pre-activation ResNet-152 (bottleneck units 3,8,36,3)."""
    return _to_symbol("resnet152_v2", "resnet152_v2_", num_classes, dtype)
