"""Small user networks for the own-network tests (imported inside worker processes only)."""


def small_cnn():
    from mxnet.gluon import nn
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3, activation="relu"), nn.MaxPool2D(2), nn.Flatten(), nn.Dense(10))
    return net


def small_mlp_symbol():
    import mxnet as mx
    x = mx.sym.Variable("data")
    x = mx.sym.FullyConnected(x, num_hidden=32, name="fc1")
    x = mx.sym.Activation(x, act_type="relu")
    return mx.sym.FullyConnected(x, num_hidden=10, name="fc2")


def embedding_net():
    from mxnet.gluon import nn
    net = nn.HybridSequential()
    net.add(nn.Embedding(1000, 16), nn.Flatten(), nn.Dense(4))
    return net
