"""AlexNet exactly as MXNet's ``example/image-classification/symbols/alexnet.py``
(commit 0a03417, Dec 2016) -- the network the published MXNet tables measured.

This is the *original* single-tower AlexNet (no channel groups), 96-256-384-384-256
filters, local response normalisation after conv1 and conv2, 50.84M parameters.
It is NOT Gluon's ``alexnet`` (the 64-192-384-256-256 "one weird trick" variant,
61.1M parameters).

mxnet is imported lazily so that importing this module is cheap.
"""


def get_symbol(num_classes=1000):
    """Return the AlexNet feature/classifier graph ending in FullyConnected
    ``fc3`` (no softmax; :func:`pytest_mxperf.zoo.build_symbol` adds it)."""
    import mxnet as mx

    sym = mx.sym
    data = sym.Variable("data")
    # stage 1
    x = sym.Convolution(data=data, kernel=(11, 11), stride=(4, 4), num_filter=96, name="conv1")
    x = sym.Activation(data=x, act_type="relu", name="relu1")
    x = sym.LRN(data=x, alpha=0.0001, beta=0.75, knorm=2, nsize=5, name="lrn1")
    x = sym.Pooling(data=x, pool_type="max", kernel=(3, 3), stride=(2, 2), name="pool1")
    # stage 2
    x = sym.Convolution(data=x, kernel=(5, 5), pad=(2, 2), num_filter=256, name="conv2")
    x = sym.Activation(data=x, act_type="relu", name="relu2")
    x = sym.LRN(data=x, alpha=0.0001, beta=0.75, knorm=2, nsize=5, name="lrn2")
    x = sym.Pooling(data=x, pool_type="max", kernel=(3, 3), stride=(2, 2), name="pool2")
    # stage 3
    x = sym.Convolution(data=x, kernel=(3, 3), pad=(1, 1), num_filter=384, name="conv3")
    x = sym.Activation(data=x, act_type="relu", name="relu3")
    x = sym.Convolution(data=x, kernel=(3, 3), pad=(1, 1), num_filter=384, name="conv4")
    x = sym.Activation(data=x, act_type="relu", name="relu4")
    x = sym.Convolution(data=x, kernel=(3, 3), pad=(1, 1), num_filter=256, name="conv5")
    x = sym.Activation(data=x, act_type="relu", name="relu5")
    x = sym.Pooling(data=x, pool_type="max", kernel=(3, 3), stride=(2, 2), name="pool3")
    # stage 4-6: classifier
    x = sym.Flatten(data=x, name="flatten")
    x = sym.FullyConnected(data=x, num_hidden=4096, name="fc1")
    x = sym.Activation(data=x, act_type="relu", name="relu6")
    x = sym.Dropout(data=x, p=0.5, name="dropout1")
    x = sym.FullyConnected(data=x, num_hidden=4096, name="fc2")
    x = sym.Activation(data=x, act_type="relu", name="relu7")
    x = sym.Dropout(data=x, p=0.5, name="dropout2")
    x = sym.FullyConnected(data=x, num_hidden=num_classes, name="fc3")
    return x
