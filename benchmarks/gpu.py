"""Training and encoding speed on one device: kcse (Keras 3 on JAX) vs HF transformers (PyTorch).

The same unsupervised SimCSE step in three stacks, on the same device, each
in processes of its own (kcse and torch never share one):

- **kcse** (`gpu_kcse.py`): `kcse.SimCSE` (temperature 0.05) around
  `kcse.SentenceEncoder(backbone, None, pooling="cls", hidden_dropout=0.3)`,
  a randomly initialised `keras_hub.models.BertBackbone`, `Adam(1e-5)`,
  `jit_compile=True`, `fit` on random token ids; `KERAS_BACKEND=jax`, the
  JAX persistent compilation cache in a temporary folder. It never imports
  TensorFlow itself (the GPU machine has none).
- **HF eager** (`gpu_torch.py`): `transformers.BertModel` of the same shape
  (no pooler), the same dropouts and loss, `torch.optim.Adam(1e-5,
  eps=1e-7)`, a plain loop; bfloat16 by `torch.autocast`.
- **torch.compile**: the same, the BertModel under `torch.compile(...,
  dynamic=False)` (the loss eager: see `gpu_torch.build_model`), its
  inductor cache in a temporary folder. On by default on CUDA; on a CPU
  only with `--torch-compile`.

Precision: bfloat16 (default; kcse's `mixed_bfloat16`, torch's autocast);
`--precisions float32,bfloat16` adds float32, where torch allows TF32
matrix products (`torch.backends.cuda.matmul.allow_tf32`,
`cudnn.allow_tf32`) as JAX's default precision computes float32 on
H100/H200; the JSON records each stack's setting.

Figures per stack and length: per-step milliseconds min / median / p90 of a
timed epoch after a warm-up epoch (kcse: an async-safe callback reading each
loss; torch: CUDA events between steps), tokens/s and TFLOP/s of the median
step (`gpu_common.step_flops`) against the bfloat16 matrix-product rate
measured on the device (`gpu_device.py`); seconds to the first step,
compilation included, "fresh" (the stack's first process, its cache empty)
and "cached" (a later process; with one round, a first-steps-only process
of every stack, HF eager's included); encode sentences/s. kcse also counts
the train programs one cell compiles: a fresh model fits Chinese STS-B's
training sentences under Su's protocol (their real lengths, characters + 2;
kcse's bundled copy, or `--stsb-dir`) at batch 64 and length 64, counting
the traces of its train step. From these, `gpu_projection.py` projects Su's
full grid in minutes; the targets of issue 43 are checked at the end
(`gpu_report.py`).

Rounds alternate the stacks (`--runs`, default 3); `--deadline S` starts no
further round that should end later than S seconds after the start, so the
table is complete after one round. `--json FILE` gets every figure
(complete: true at the end); `--logs DIR` keeps each stack's stderr (one
file a stack). A failed stack is reported and left out; the exit status is
then 1.

    python benchmarks/gpu.py [--runs 3] [--lengths 64,128] [--precisions bfloat16] \\
        [--steps 30] [--json gpu.json] [--logs logs]
    python benchmarks/gpu.py --tiny     # 2 layers, hidden 64: a smoke run on a CPU

On a CPU torch runs with `OMP_WAIT_POLICY=PASSIVE` (its spinning OpenMP
threads slowed its steps 8-20x on a shared machine), and `--tiny` runs kcse
with `XLA_FLAGS=--xla_backend_optimization_level=0` (XLA's CPU compiler
otherwise spends ~25 s on even that model's step). On the GPU machine:
`benchmarks/gpu_run.sh`.
"""

import argparse
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

BENCHMARKS = pathlib.Path(__file__).resolve().parent
REPO_ROOT = BENCHMARKS.parent
# kcse from this checkout, installed or not, and the gpu_* modules beside this script.
sys.path[:0] = [str(path) for path in (BENCHMARKS, REPO_ROOT) if str(path) not in sys.path]

from gpu_common import (  # noqa: E402
    GRID_MODELS, MAX_POSITIONS, PRECISIONS, STACK_LABELS, STACKS, VOCABULARY, write_json,
)

TINY = dict(
    shape="smoke", vocabulary=1000, batch_size=8, lengths=(16, 32), steps=4, runs=1,
    encode_sentences=32, encode_batch_size=16, matmul_size=512, cell_sentences=200,
)
DEFAULTS = dict(runs=3, lengths=(64, 128), steps=30, batch_size=64, encode_batch_size=64,
                cell_sentences=10_000)


def int_list(text):
    return tuple(int(part) for part in text.split(",") if part)


def name_list(text):
    return tuple(part.strip() for part in text.split(",") if part.strip())


def argument_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--runs", type=int, help="processes of each stack, alternated (default 3; --tiny 1)")
    add("--lengths", type=int_list, help="token lengths (default 64,128; --tiny 16,32)")
    add("--precisions", type=name_list, default=("bfloat16",),
        help=f"of {', '.join(PRECISIONS)} (default bfloat16)")
    add("--steps", type=int, help="steps of an epoch, warm-up and timed (default 30; --tiny 4)")
    add("--batch-size", type=int, help="sentences a step (default 64; --tiny 8)")
    add("--encode-sentences", type=int, help="sentences encoded per measurement (default "
        "8192 on an accelerator, 512 on a CPU; --tiny 32)")
    add("--encode-batch-size", type=int, help="(default 64, as the grid's; --tiny 16)")
    add("--stacks", type=name_list, default=STACKS, help=f"of {', '.join(STACKS)} (default all)")
    add("--torch-compile", action="store_true", help="run torch.compile on a CPU too")
    add("--measure-all-shapes", action="store_true",
        help="also measure SimBERT-small and -tiny shapes for the projection")
    add("--projection-precision", help="(default bfloat16 when measured)")
    add("--matmul-size", type=int, help="n of the n^3 matrix products (default 8192 on CUDA, "
        "2048 on a CPU; --tiny 512)")
    add("--stsb-dir", help="the senteval_cn folder whose STS-B gives the cell's lengths "
        "(default: kcse's bundled copy)")
    add("--cell-sentences", type=int, help="STS-B sentences of the counted cell (default "
        "10000, Su's; --tiny 200)")
    add("--worker-timeout", type=float, default=900.0, help="seconds a process may take")
    add("--deadline", type=float, help="seconds: start no further round that should end "
        "later than this after the start")
    add("--json", help="write every figure to this file")
    add("--logs", help="keep each stack's stderr in this folder (one file a stack)")
    add("--from-json", metavar="FILE", help="measure nothing: summarise, project and check "
        "the targets again from the runs an earlier --json holds (e.g. a GPU run's, after "
        "the projection changed)")
    add("--tiny", action="store_true", help="2 layers, hidden 64, vocabulary 1000, batch 8, "
        "lengths 16,32, 4 steps, 1 run, a 200-sentence cell: a smoke run")
    # Internal: a measuring process.
    add("--worker", choices=(*STACKS, "device"), help=argparse.SUPPRESS)
    add("--worker-out", help=argparse.SUPPRESS)
    add("--cache", help=argparse.SUPPRESS)
    add("--first-steps-only", action="store_true", help=argparse.SUPPRESS)
    add("--device-kind", help=argparse.SUPPRESS)
    return parser


def parse_args(argv=None):
    parser = argument_parser()
    args = parser.parse_args(argv)
    tiny = TINY if args.tiny else {}
    args.shape = tiny.get("shape", "base")
    args.vocabulary = tiny.get("vocabulary", VOCABULARY)
    for name, default in {**DEFAULTS, "matmul_size": None, "encode_sentences": None}.items():
        if getattr(args, name) is None:
            setattr(args, name, tiny.get(name, default))
    for kind, given, known in (("precision", args.precisions, PRECISIONS),
                               ("stack", args.stacks, STACKS)):
        if set(given) - set(known):
            parser.error(f"unknown {kind}(s) {', '.join(sorted(set(given) - set(known)))}; "
                         f"use {', '.join(known)}")
    if args.runs < 1 or args.steps < 2 or args.batch_size < 2 or not args.lengths:
        parser.error("need --runs >= 1, --steps >= 2, --batch-size >= 2 and a length")
    if args.cell_sentences < 2:
        parser.error("need --cell-sentences >= 2")
    if max(args.lengths) > MAX_POSITIONS or min(args.lengths) < 2:
        parser.error(f"lengths must be in 2..{MAX_POSITIONS}")
    if args.projection_precision is None:
        args.projection_precision = (
            "bfloat16" if "bfloat16" in args.precisions else args.precisions[0])
    elif args.projection_precision not in args.precisions:
        parser.error("--projection-precision must be one of --precisions")
    if args.stsb_dir is None:
        args.stsb_dir = str(REPO_ROOT / "kcse" / "data" / "bundled")
    elif not (pathlib.Path(args.stsb_dir) / "STS-B").is_dir():
        parser.error(f"--stsb-dir {args.stsb_dir}: no STS-B folder in it")
    return args


def run_worker(args):
    if args.worker == "device":
        from gpu_device import device_worker
        output = device_worker(args)
    elif args.worker == "kcse":
        from gpu_kcse import kcse_worker
        output = kcse_worker(args)
    else:
        from gpu_torch import torch_worker
        output = torch_worker(args, compiled=args.worker == "torch_compile")
    write_json(args.worker_out, output)


def forwarded_arguments(argv):
    """This command's arguments for a worker: all but --json / --logs and their values."""
    forwarded, skip = [], False
    for argument in argv:
        if skip:
            skip = False
        elif argument in ("--json", "--logs"):
            skip = True
        elif not argument.startswith(("--json=", "--logs=")):
            forwarded.append(argument)
    return forwarded


class Spawner:
    """Runs the worker processes; their stderr goes to one log file a stack."""

    def __init__(self, argv, folder, logs, timeout):
        self.argv, self.folder, self.timeout = argv, pathlib.Path(folder), timeout
        self.logs = pathlib.Path(logs or self.folder / "logs")
        self.logs.mkdir(parents=True, exist_ok=True)
        self.extra, self.environments = {}, {}

    def __call__(self, stack, *extra):
        """`(its JSON output, None)`, or `(None, why it failed)`."""
        out = self.folder / f"{stack}-{time.monotonic_ns()}.json"
        log = self.logs / f"{stack}.log"
        command = [sys.executable, str(BENCHMARKS / "gpu.py"), *self.argv, "--worker", stack,
                   "--worker-out", str(out), *self.extra.get(stack, ()), *extra]
        environment = {**os.environ, **self.environments.get(stack, {})}
        environment.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        began = time.perf_counter()
        with open(log, "a") as stderr:
            stderr.write(f"==== {' '.join(command[2:])}\n")
            stderr.flush()
            try:
                code = subprocess.run(command, stderr=stderr, env=environment, cwd=REPO_ROOT,
                                      timeout=self.timeout).returncode
            except subprocess.TimeoutExpired:
                code = f"killed after --worker-timeout {self.timeout:.0f} s"
        if code != 0 or not out.is_file():
            tail = log.read_text(errors="replace")[-3000:]
            return None, f"the {stack} process failed ({code}); the end of {log}:\n{tail}"
        result = json.loads(out.read_text())
        result["process_s"] = time.perf_counter() - began
        return result, None


def configure(spawner, args, device, report):
    """The stacks to run on this device, and each one's cache and environment."""
    kind = device["device"]
    spawner.argv += ["--device-kind", kind]
    stacks = list(args.stacks)
    if "torch_compile" in stacks and kind == "cpu" and not args.torch_compile:
        stacks.remove("torch_compile")
        report["skipped_stacks"]["torch_compile"] = "on a CPU only with --torch-compile"
    spawner.extra["kcse"] = ["--cache", str(spawner.folder / "jax-cache")]
    spawner.environments["torch_compile"] = {
        "TORCHINDUCTOR_CACHE_DIR": str(spawner.folder / "inductor-cache")}
    if kind == "cpu" and "OMP_WAIT_POLICY" not in os.environ:
        for stack in ("hf_eager", "torch_compile"):
            spawner.environments.setdefault(stack, {})["OMP_WAIT_POLICY"] = "PASSIVE"
        report["torch_omp_wait_policy"] = "PASSIVE"
    if args.tiny and kind == "cpu":
        flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()
        spawner.environments["kcse"] = {"XLA_FLAGS": flags}
        report["kcse_xla_flags"] = flags
        print(f"--tiny on a CPU: kcse runs with XLA_FLAGS={flags}", flush=True)
    return stacks


def round_estimate(runs, stacks):
    """Seconds the next round should take: the last, its compilations now read back
    from the caches (taken as a quarter of their first time; kcse measured ~1/5)."""
    total = 0.0
    for stack in stacks:
        last = runs[stack][-1]
        if len(runs[stack]) > 1 or stack == "hf_eager":
            total += last["process_s"]
            continue
        compiling = sum(record.get("first_step_s", 0) + record.get("first_encode_s", 0)
                        for record in last["results"].values())
        total += last["process_s"] - 0.75 * compiling
    return total


def run_rounds(spawner, args, stacks, report, left, save):
    """Alternated rounds of every stack; a stack that fails is left out. Its runs a stack."""
    runs = {stack: [] for stack in stacks}
    for run in range(args.runs):
        needed = round_estimate(runs, stacks) if run else 0.0
        if needed > left():
            print(f"--deadline: {left():.0f} s left, a round would take {needed:.0f} s; "
                  f"stopping after {run} run(s)", flush=True)
            report["stopped_by_deadline_after_runs"] = run
            break
        for stack in list(stacks):
            print(f"run {run + 1}/{args.runs}: {STACK_LABELS[stack]}", flush=True)
            output, failure = spawner(stack)
            if failure:
                print(failure, flush=True)
                report["failed_stacks"][stack] = failure
                stacks.remove(stack)
                runs.pop(stack)
            else:
                print(f"  ({output['process_s']:.0f} s)", flush=True)
                runs[stack].append(output)
            save()
        if not stacks:
            sys.exit("every stack failed")
    return runs


def cached_first_steps(spawner, stacks, runs, report, left):
    """With one round: each stack once more, first steps only, its cache filled."""
    cached = {}
    for stack in stacks:
        if len(runs[stack]) > 1:
            continue
        if runs[stack][0]["process_s"] / 2 > left():
            print(f"--deadline: no time left for {STACK_LABELS[stack]}'s cached first steps")
            continue
        print(f"{STACK_LABELS[stack]} again, first steps only, its cache filled", flush=True)
        output, failure = spawner(stack, "--first-steps-only")
        if failure:
            print(failure, flush=True)
            report["failed_stacks"][f"{stack} (first steps, cached)"] = failure
        else:
            cached[stack] = [output]
            print(f"  ({output['process_s']:.0f} s)", flush=True)
    return cached


def assemble(report, args, device, stacks, runs, cached):
    """Summaries, rates, the projection and the targets into `report`."""
    from gpu_projection import cell_plans, grid_cells, project_grid
    from gpu_report import add_rates, summarize, targets

    from kcse.data.chinese import SPLIT_SIZES

    peak_dtype = max(device["matmul_tflops"], key=device["matmul_tflops"].get)
    report["peak"] = {"dtype": peak_dtype, "tflops": device["matmul_tflops"][peak_dtype]}
    report["runs_completed"] = min(len(runs[stack]) for stack in stacks)
    for stack in stacks:
        later = runs[stack][1:] + cached.get(stack, [])
        summary = summarize(runs[stack], runs[stack][:1], later)
        add_rates(summary, args.batch_size, report["peak"]["tflops"])
        info = {k: v for k, v in runs[stack][-1].items() if k not in ("results", "cell")}
        report["stacks"][stack] = {"runs": runs[stack], "summary": summary, "info": info,
                                   "first_steps_only_runs": cached.get(stack, [])}
        if "cell" in runs[stack][0]:
            report["stacks"][stack]["cell"] = runs[stack][0]["cell"]
    cell = report["stacks"].get("kcse", {}).get("cell")
    projection = {"precision": args.projection_precision, "cells": grid_cells(),
                  "tasks": list(SPLIT_SIZES), "models": GRID_MODELS,
                  "cell_plans": cell_plans(), "stacks": {}, "notes": []}
    eager = report["stacks"].get("hf_eager", {}).get("summary")
    for stack in stacks:
        records = [record for run in runs[stack] for record in run["results"].values()]
        result = project_grid(report["stacks"][stack]["summary"], stack, args,
                              args.projection_precision, eager, records,
                              cell and cell["train_programs"])
        if result:
            projection["stacks"][stack] = result
            projection["notes"] = sorted(set(projection["notes"]) | set(result["notes"]))
    report["projection"] = projection
    report["targets"] = targets(report, args)



def report_again(args):
    """The report of the runs in `args.from_json`, assembled again by this code."""
    with open(args.from_json, encoding="utf-8") as file:
        saved = json.load(file)
    measured = argparse.Namespace(**{**vars(args), **saved["arguments"]})
    stacks = [stack for stack in STACKS if stack in saved["stacks"]]  # JSON sorts them.
    runs = {stack: saved["stacks"][stack]["runs"] for stack in stacks}
    cached = {stack: saved["stacks"][stack]["first_steps_only_runs"] for stack in stacks
              if saved["stacks"][stack]["first_steps_only_runs"]}
    report = {name: saved[name] for name in (
        "complete", "skipped_stacks", "failed_stacks", "arguments", "device")}
    report["stacks"] = {}
    assemble(report, measured, saved["device"], stacks, runs, cached)
    if args.json:
        write_json(args.json, report)
    from gpu_report import print_report
    print_report(report, measured)


def main():
    args = parse_args()
    if args.worker:
        run_worker(args)
        return
    if args.from_json:
        report_again(args)
        return
    began = time.monotonic()
    folder = tempfile.mkdtemp(prefix="kcse-gpu-bench-")
    report = {"complete": False, "stacks": {}, "skipped_stacks": {}, "failed_stacks": {},
              "arguments": {k: v for k, v in vars(args).items() if k not in (
                  "worker", "worker_out", "cache", "first_steps_only", "device_kind")}}

    def save():
        if args.json:
            write_json(args.json, report)

    def left():
        return math.inf if args.deadline is None else args.deadline - (time.monotonic() - began)

    try:
        spawner = Spawner(forwarded_arguments(sys.argv[1:]), folder, args.logs,
                          args.worker_timeout)
        spawner.environments["device"] = {
            "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
        print(f"measuring the device (torch, {args.matmul_size or 'default'} matrix size) ...",
              flush=True)
        device, failure = spawner("device")
        if failure:
            sys.exit(failure)
        report["device"] = device
        stacks = configure(spawner, args, device, report)
        if not stacks:
            sys.exit("no stack to run on this device")
        runs = run_rounds(spawner, args, stacks, report, left, save)
        cached = cached_first_steps(spawner, stacks, runs, report, left)
        assemble(report, args, device, stacks, runs, cached)
        report["complete"] = not report["failed_stacks"]
        save()
        from gpu_report import print_report
        print_report(report, args)
        if report["failed_stacks"]:
            sys.exit(f"failed: {', '.join(report['failed_stacks'])} (see above and the JSON)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
