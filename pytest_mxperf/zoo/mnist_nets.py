"""The two MNIST-sized networks of MXNet's ``example/image-classification/symbols/``
(``lenet.py`` and ``mlp.py``), re-written as plain symbols.  Input 1x28x28.
mxnet is imported lazily.
"""


def get_lenet(num_classes=10):
    """LeNet: conv 20 5x5, tanh, max-pool 2/2, conv 50 5x5, tanh, max-pool 2/2,
    FC 500, tanh, FC num_classes.  Ends in FullyConnected ``fc2`` (no softmax)."""
    import mxnet as mx

    sym = mx.sym
    data = sym.Variable("data")
    x = sym.Convolution(data=data, kernel=(5, 5), num_filter=20, name="conv1")
    x = sym.Activation(data=x, act_type="tanh", name="tanh1")
    x = sym.Pooling(data=x, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool1")
    x = sym.Convolution(data=x, kernel=(5, 5), num_filter=50, name="conv2")
    x = sym.Activation(data=x, act_type="tanh", name="tanh2")
    x = sym.Pooling(data=x, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool2")
    x = sym.Flatten(data=x, name="flatten")
    x = sym.FullyConnected(data=x, num_hidden=500, name="fc1")
    x = sym.Activation(data=x, act_type="tanh", name="tanh3")
    return sym.FullyConnected(data=x, num_hidden=num_classes, name="fc2")


def get_mlp(num_classes=10):
    """MLP: flatten 784 -> FC 128, relu -> FC 64, relu -> FC num_classes.
    Ends in FullyConnected ``fc3`` (no softmax)."""
    import mxnet as mx

    sym = mx.sym
    data = sym.Variable("data")
    x = sym.Flatten(data=data, name="flatten")
    x = sym.FullyConnected(data=x, num_hidden=128, name="fc1")
    x = sym.Activation(data=x, act_type="relu", name="relu1")
    x = sym.FullyConnected(data=x, num_hidden=64, name="fc2")
    x = sym.Activation(data=x, act_type="relu", name="relu2")
    return sym.FullyConnected(data=x, num_hidden=num_classes, name="fc3")
