"""A checkpoint's index read without loading tensors, and its tensors compared
with arrays a piece at a time: against TensorFlow's own checkpoint reader
(`tf.train.load_checkpoint`), which we did not write."""

import numpy as np
import pytest
import tensorflow as tf

from kcse.export import checkpoint_bundle


def written_checkpoint(folder, variables, shard_bytes=None):
    """`tf.train.Checkpoint(weights=variables)` written under `folder`
    (in shards of at most `shard_bytes`); returns its prefix."""
    options = tf.train.CheckpointOptions()
    if shard_bytes is not None:
        options = tf.train.CheckpointOptions(
            experimental_sharding_callback=tf.train.experimental.MaxShardSizePolicy(shard_bytes))
    return tf.train.Checkpoint(weights=variables).write(str(folder / "checkpoint"), options)


def many_variables(one_dtype=False):
    """More keys than one 4 KB index block holds, of several dtypes and
    shapes, or all float32 [2, 7]."""
    generator = np.random.default_rng(0)
    variables = [tf.Variable(generator.normal(size=(2 if one_dtype else index % 5 + 1, 7))
                             .astype("float32")) for index in range(150)]
    if not one_dtype:
        variables.append(tf.Variable(np.arange(12, dtype="int32").reshape(3, 4)))
        variables.append(tf.Variable(tf.constant(generator.normal(size=(6, 5)), tf.bfloat16)))
        variables.append(tf.Variable(3.5, dtype=tf.float64))
    return variables


# Shards of 10 tensors of 56 bytes: a shard size policy fills each shard to
# its size, slicing a tensor that does not fit.
@pytest.mark.parametrize("shard_bytes", [None, 560], ids=["one_shard", "shards"])
def test_every_tensor_lies_where_tensorflows_reader_finds_it(tmp_path, shard_bytes):
    variables = many_variables(one_dtype=shard_bytes is not None)
    prefix = written_checkpoint(tmp_path, variables, shard_bytes)
    header, entries = checkpoint_bundle.bundle_index(prefix)
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    assert set(entries) == set(shapes)
    assert header.num_shards == (1 if shard_bytes is None else 15)
    dtypes = reader.get_variable_to_dtype_map()
    keys = checkpoint_bundle.list_checkpoint_keys(prefix, "weights")
    assert len(keys) == len(variables)
    for key, variable in zip(keys, variables):
        entry = entries[key]
        assert [dimension.size for dimension in entry.shape.dim] == shapes[key]
        assert tf.as_dtype(entry.dtype) == dtypes[key] == variable.dtype
        stored = reader.get_tensor(key)
        np.testing.assert_array_equal(stored, variable.numpy())
        data_file = f"{prefix}.data-{entry.shard_id:05d}-of-{header.num_shards:05d}"
        with open(data_file, "rb") as data:
            data.seek(entry.offset)
            assert data.read(entry.size) == np.ascontiguousarray(stored).tobytes()
        assert checkpoint_bundle.stored_tensor_problem(prefix, header, entry, variable) is None


def test_a_tensor_stored_in_slices_is_named(tmp_path):
    variables = many_variables()
    prefix = written_checkpoint(tmp_path, variables, 300)
    header, entries = checkpoint_bundle.bundle_index(prefix)
    keys = checkpoint_bundle.list_checkpoint_keys(prefix, "weights")
    sliced = [(key, variable) for key, variable in zip(keys, variables)
              if entries[key].slices]
    assert sliced and set(entries) == set(tf.train.load_checkpoint(prefix)
                                          .get_variable_to_shape_map())
    key, variable = sliced[0]
    assert checkpoint_bundle.stored_tensor_problem(
        prefix, header, entries[key], variable
    ) == f"is stored in {len(entries[key].slices)} slices, which kcse does not compare"


@pytest.fixture
def one_tensor(tmp_path, monkeypatch):
    """A checkpoint of one [5, 2] float32 tensor, compared 16 bytes (2 rows)
    at a time."""
    monkeypatch.setattr(checkpoint_bundle, "READ_BYTES", 16)
    values = np.arange(10, dtype="float32").reshape(5, 2)
    prefix = written_checkpoint(tmp_path, [tf.Variable(values)])
    header, entries = checkpoint_bundle.bundle_index(prefix)
    (key,) = checkpoint_bundle.list_checkpoint_keys(prefix, "weights")
    return prefix, header, entries[key], values


def test_a_stored_tensor_differing_from_the_variable_is_named(one_tensor):
    prefix, header, entry, values = one_tensor
    changed = values.copy()
    changed[2, 1] = np.nextafter(changed[2, 1], np.float32(100))  # one bit, in rows 2-3
    problem = checkpoint_bundle.stored_tensor_problem
    assert problem(prefix, header, entry, tf.Variable(values)) is None
    assert problem(prefix, header, entry, tf.Variable(changed)) == "differs in rows 2-3"
    # Read as a sparse lookup reads it (copy-on-read mode).
    looked_up = tf.Variable(changed)
    looked_up.sparse_read([0])
    assert problem(prefix, header, entry, looked_up) == "differs in rows 2-3"
    assert problem(prefix, header, entry, tf.Variable(values.astype("float64"))) == (
        "is float32, not float64")
    assert problem(prefix, header, entry, tf.Variable(values.reshape(2, 5))) == (
        "has shape [5, 2], not [2, 5]")
    data_file = f"{prefix}.data-00000-of-00001"
    with open(data_file, "r+b") as data:
        data.truncate(entry.offset + 30)
    assert problem(prefix, header, entry, tf.Variable(values)) == (
        f"ends early: {data_file} is cut short")


def test_a_file_that_is_not_an_index_is_refused(tmp_path):
    prefix = tmp_path / "checkpoint"
    (tmp_path / "checkpoint.index").write_bytes(b"not a table" * 10)
    with pytest.raises(ValueError, match=f"{prefix}.index: not a TensorFlow checkpoint index"):
        checkpoint_bundle.bundle_index(prefix)
