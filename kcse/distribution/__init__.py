"""Training on several devices and processes.

Beneath the losses and objectives, which use it: the in-batch negatives
gathered across `tf.distribute` replicas (`cross_replica`), the
`MirroredStrategy` of one machine's GPUs (`strategy`), and multi-process
training on Keras' JAX distribution: the cluster from the
`KERAS_DISTRIBUTION_*` variables (`cluster`, Keras-free), the
data-parallel start, and which process writes (`data_parallel`).
"""

from kcse.foundation.lazy_exports import lazy_exports

_EXPORTS = {
    "Cluster": "kcse.distribution.cluster",
    "cluster_from_environment": "kcse.distribution.cluster",
    "JOB_ADDRESSES": "kcse.distribution.cluster",
    "NUM_PROCESSES": "kcse.distribution.cluster",
    "PROCESS_ID": "kcse.distribution.cluster",
    "start_data_parallel": "kcse.distribution.data_parallel",
    "process_count": "kcse.distribution.data_parallel",
    "is_chief": "kcse.distribution.data_parallel",
    "every_process_predicts": "kcse.distribution.data_parallel",
    "check_global_batch_size": "kcse.distribution.data_parallel",
    "check_global_dataset": "kcse.distribution.data_parallel",
    "gather_across_replicas": "kcse.distribution.cross_replica",
    "choose_strategy": "kcse.distribution.strategy",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
