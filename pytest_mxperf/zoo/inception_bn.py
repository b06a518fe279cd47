"""BN-Inception as in MXNet's ``example/image-classification/symbols/inception-bn.py``
(commit 0a03417, Dec 2016), 224x224 branch: conv 7x7/2, pool, conv 1x1 + 3x3, pool,
inception 3a, 3b, 3c(stride 2), 4a-4d, 4e(stride 2), 5a, 5b, global 7x7 average
pool, one FullyConnected classifier.  Every convolution is followed by BatchNorm
(fix_gamma=False, so gamma and beta are learnable) and ReLU.

Re-written here (not copied) from the reference definition; layer widths are the
same.  mxnet is imported lazily.
"""

_EPS = 1e-10 + 1e-5
_BN_MOM = 0.9


def _conv_bn_relu(mx, data, num_filter, kernel, name, stride=(1, 1), pad=(0, 0)):
    conv = mx.sym.Convolution(data=data, num_filter=num_filter, kernel=kernel,
                              stride=stride, pad=pad, name="conv_%s" % name)
    bn = mx.sym.BatchNorm(data=conv, fix_gamma=False, eps=_EPS, momentum=_BN_MOM,
                          name="bn_%s" % name)
    return mx.sym.Activation(data=bn, act_type="relu", name="relu_%s" % name)


def _block_a(mx, data, n1x1, n3x3red, n3x3, nd3x3red, nd3x3, pool, proj, name):
    """Inception module with 4 branches, spatial size preserved."""
    b1 = _conv_bn_relu(mx, data, n1x1, (1, 1), "%s_1x1" % name)
    b2 = _conv_bn_relu(mx, data, n3x3red, (1, 1), "%s_3x3_reduce" % name)
    b2 = _conv_bn_relu(mx, b2, n3x3, (3, 3), "%s_3x3" % name, pad=(1, 1))
    b3 = _conv_bn_relu(mx, data, nd3x3red, (1, 1), "%s_double_3x3_reduce" % name)
    b3 = _conv_bn_relu(mx, b3, nd3x3, (3, 3), "%s_double_3x3_0" % name, pad=(1, 1))
    b3 = _conv_bn_relu(mx, b3, nd3x3, (3, 3), "%s_double_3x3_1" % name, pad=(1, 1))
    b4 = mx.sym.Pooling(data=data, kernel=(3, 3), stride=(1, 1), pad=(1, 1),
                        pool_type=pool, name="%s_pool_%s_pool" % (pool, name))
    b4 = _conv_bn_relu(mx, b4, proj, (1, 1), "%s_proj" % name)
    return mx.sym.Concat(b1, b2, b3, b4, name="ch_concat_%s_chconcat" % name)


def _block_b(mx, data, n3x3red, n3x3, nd3x3red, nd3x3, name):
    """Grid-reduction inception module (stride 2), 3 branches."""
    b1 = _conv_bn_relu(mx, data, n3x3red, (1, 1), "%s_3x3_reduce" % name)
    b1 = _conv_bn_relu(mx, b1, n3x3, (3, 3), "%s_3x3" % name, stride=(2, 2), pad=(1, 1))
    b2 = _conv_bn_relu(mx, data, nd3x3red, (1, 1), "%s_double_3x3_reduce" % name)
    b2 = _conv_bn_relu(mx, b2, nd3x3, (3, 3), "%s_double_3x3_0" % name, pad=(1, 1))
    b2 = _conv_bn_relu(mx, b2, nd3x3, (3, 3), "%s_double_3x3_1" % name,
                       stride=(2, 2), pad=(1, 1))
    b3 = mx.sym.Pooling(data=data, kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                        pool_type="max", name="max_pool_%s_pool" % name)
    return mx.sym.Concat(b1, b2, b3, name="ch_concat_%s_chconcat" % name)


def get_symbol(num_classes=1000):
    """Return the BN-Inception graph ending in FullyConnected ``fc1`` (no softmax)."""
    import mxnet as mx

    data = mx.sym.Variable("data")
    x = _conv_bn_relu(mx, data, 64, (7, 7), "1", stride=(2, 2), pad=(3, 3))
    x = mx.sym.Pooling(data=x, kernel=(3, 3), stride=(2, 2), pool_type="max", name="pool_1")
    x = _conv_bn_relu(mx, x, 64, (1, 1), "2_red")
    x = _conv_bn_relu(mx, x, 192, (3, 3), "2", pad=(1, 1))
    x = mx.sym.Pooling(data=x, kernel=(3, 3), stride=(2, 2), pool_type="max", name="pool_2")
    #            n1x1 3x3r 3x3 d3x3r d3x3 pool  proj
    x = _block_a(mx, x, 64, 64, 64, 64, 96, "avg", 32, "3a")
    x = _block_a(mx, x, 64, 64, 96, 64, 96, "avg", 64, "3b")
    x = _block_b(mx, x, 128, 160, 64, 96, "3c")
    x = _block_a(mx, x, 224, 64, 96, 96, 128, "avg", 128, "4a")
    x = _block_a(mx, x, 192, 96, 128, 96, 128, "avg", 128, "4b")
    x = _block_a(mx, x, 160, 128, 160, 128, 160, "avg", 128, "4c")
    x = _block_a(mx, x, 96, 128, 192, 160, 192, "avg", 128, "4d")
    x = _block_b(mx, x, 128, 192, 192, 256, "4e")
    x = _block_a(mx, x, 352, 192, 320, 160, 224, "avg", 128, "5a")
    x = _block_a(mx, x, 352, 192, 320, 192, 224, "max", 128, "5b")
    x = mx.sym.Pooling(data=x, kernel=(7, 7), stride=(1, 1), pool_type="avg",
                       name="global_pool")
    x = mx.sym.Flatten(data=x, name="flatten")
    return mx.sym.FullyConnected(data=x, num_hidden=num_classes, name="fc1")
