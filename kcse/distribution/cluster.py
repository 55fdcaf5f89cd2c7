"""The cluster of a multi-process run, from Keras' environment variables.

The cluster comes from Keras' standard environment variables, one set per
process: `KERAS_DISTRIBUTION_JOB_ADDRESSES` (the coordinator's `host:port`,
process 0's, or every process's address comma-separated, the first being
the coordinator), `KERAS_DISTRIBUTION_NUM_PROCESSES` and
`KERAS_DISTRIBUTION_PROCESS_ID` (0 .. processes - 1). `kcse train
--distributed` and the recipes' `--distributed` read them.

`cluster_from_environment` imports nothing heavy, so the variables are
checked with the other arguments, before any work.
"""

import dataclasses
import os

JOB_ADDRESSES = "KERAS_DISTRIBUTION_JOB_ADDRESSES"
NUM_PROCESSES = "KERAS_DISTRIBUTION_NUM_PROCESSES"
PROCESS_ID = "KERAS_DISTRIBUTION_PROCESS_ID"


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The processes of a multi-process run and this process's place in it.

    Args:
        job_addresses: the coordinator's `host:port` (process 0's), or every
            process's address comma-separated (the first is the
            coordinator), as `keras.distribution.initialize` takes them.
        num_processes: how many processes train together.
        process_id: this process's number, 0 .. `num_processes` - 1; process
            0 is the coordinator (and the one that writes results).

    Example:
    ```python
    from kcse.distribution import Cluster, cluster_from_environment

    cluster = cluster_from_environment({
        "KERAS_DISTRIBUTION_JOB_ADDRESSES": "10.0.0.1:1234",
        "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
        "KERAS_DISTRIBUTION_PROCESS_ID": "1",
    })
    assert cluster == Cluster("10.0.0.1:1234", num_processes=2, process_id=1)
    ```
    """

    job_addresses: str
    num_processes: int
    process_id: int


def cluster_from_environment(environ=None):
    """The `Cluster` that Keras' `KERAS_DISTRIBUTION_*` variables describe.

    Reads `environ` (default `os.environ`). All three variables are needed;
    a missing or malformed one is a `ValueError` naming it.

    Example:
    ```python
    from kcse.distribution import cluster_from_environment

    try:
        cluster_from_environment({"KERAS_DISTRIBUTION_NUM_PROCESSES": "2"})
    except ValueError as error:
        print(error)
    # multi-process training needs KERAS_DISTRIBUTION_JOB_ADDRESSES and
    # KERAS_DISTRIBUTION_PROCESS_ID set (with KERAS_DISTRIBUTION_NUM_PROCESSES) ...
    ```
    """
    environ = os.environ if environ is None else environ
    names = (JOB_ADDRESSES, NUM_PROCESSES, PROCESS_ID)
    missing = [name for name in names if not environ.get(name, "").strip()]
    if missing:
        given = [name for name in names if name not in missing]
        raise ValueError(
            f"multi-process training needs {' and '.join(missing)} set"
            + (f" (with {' and '.join(given)})" if given else "")
            + ": the coordinator's host:port, the number of processes and "
            "this process's number, 0 for the coordinator"
        )
    addresses = environ[JOB_ADDRESSES].strip()
    for address in addresses.split(","):
        host, colon, port = address.strip().rpartition(":")
        if not (host and colon and port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(
                f"{JOB_ADDRESSES}={addresses!r}: each address must be host:port "
                f"with a port in 1..65535; got {address!r}"
            )
    num_processes = _integer(environ, NUM_PROCESSES, minimum=1)
    process_id = _integer(environ, PROCESS_ID, minimum=0)
    if process_id >= num_processes:
        raise ValueError(
            f"{PROCESS_ID}={process_id} must be below "
            f"{NUM_PROCESSES}={num_processes}"
        )
    count = len(addresses.split(","))
    if count > 1 and count != num_processes:
        raise ValueError(
            f"{JOB_ADDRESSES} lists {count} addresses but "
            f"{NUM_PROCESSES}={num_processes}"
        )
    return Cluster(addresses, num_processes, process_id)


def _integer(environ, name, minimum):
    text = environ[name].strip()
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {text!r}")
    return value
