"""The cluster of a multi-process run, read from `KERAS_DISTRIBUTION_*`."""

import pytest

from kcse import distribution


def cluster(addresses="10.0.0.1:1234", processes="2", process_id="0"):
    values = {distribution.JOB_ADDRESSES: addresses,
              distribution.NUM_PROCESSES: processes,
              distribution.PROCESS_ID: process_id}
    return {name: value for name, value in values.items() if value is not None}


def test_cluster_from_environment():
    assert distribution.cluster_from_environment(
        cluster("10.0.0.1:1234,10.0.0.2:2345", "2", "1")
    ) == distribution.Cluster("10.0.0.1:1234,10.0.0.2:2345", 2, 1)


@pytest.mark.parametrize("environ,message", [
    ({}, "needs KERAS_DISTRIBUTION_JOB_ADDRESSES and "
         "KERAS_DISTRIBUTION_NUM_PROCESSES and KERAS_DISTRIBUTION_PROCESS_ID set"),
    (cluster(process_id=None), "needs KERAS_DISTRIBUTION_PROCESS_ID set (with "
                               "KERAS_DISTRIBUTION_JOB_ADDRESSES and"),
    (cluster(addresses="10.0.0.1"), "each address must be host:port"),
    (cluster(addresses="10.0.0.1:99999"), "got '10.0.0.1:99999'"),
    (cluster(processes="two"), "KERAS_DISTRIBUTION_NUM_PROCESSES must be an "
                               "integer >= 1; got 'two'"),
    (cluster(processes="0"), "KERAS_DISTRIBUTION_NUM_PROCESSES must be an integer >= 1"),
    (cluster(process_id="-1"), "KERAS_DISTRIBUTION_PROCESS_ID must be an integer >= 0"),
    (cluster(process_id="2"), "KERAS_DISTRIBUTION_PROCESS_ID=2 must be below "
                              "KERAS_DISTRIBUTION_NUM_PROCESSES=2"),
    (cluster(addresses="a:1,b:2,c:3"), "lists 3 addresses but "
                                       "KERAS_DISTRIBUTION_NUM_PROCESSES=2"),
])
def test_cluster_from_environment_names_the_bad_variable(environ, message):
    with pytest.raises(ValueError) as error:
        distribution.cluster_from_environment(environ)
    assert message in str(error.value)
