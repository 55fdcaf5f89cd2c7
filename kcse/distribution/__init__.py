"""Training on several devices and processes.

Beneath the losses and objectives, which use it: the in-batch negatives
gathered across `tf.distribute` replicas (`cross_replica`), the
`MirroredStrategy` of one machine's GPUs (`strategy`), and multi-process
training on Keras' JAX distribution: the cluster from the
`KERAS_DISTRIBUTION_*` variables (`cluster`, Keras-free), the
data-parallel start, and which process writes (`data_parallel`).
"""

from kcse.public_api import exports

__all__, __getattr__, __dir__ = exports(__name__)
