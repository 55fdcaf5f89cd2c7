"""`benchmarks/gpu.py`'s summary of the workers' figures, the targets and the printed table."""

import statistics

from gpu_common import SHAPES, STACK_LABELS, STACKS, key, step_flops

STEP_FIELDS = ("ms_per_step", "ms_min", "ms_p90", "encode_sentences_per_s")
# The GPU targets (issue 43; docs/gpu.md): kcse's step speed over each other
# stack's at a length, at least; train programs a cell and grid minutes, at most.
SPEED_TARGETS = (("hf_eager", 64, 1.8), ("torch_compile", 64, 1.0), ("torch_compile", 128, 1.0))
MAX_TRAIN_PROGRAMS = 3
MAX_GRID_MINUTES = 20


def summarize(stack_runs, fresh_runs, cached_runs):
    """Per measurement: medians over runs, and first-step seconds fresh / cached."""
    summary = {}
    for name in sorted({name for run in stack_runs for name in run["results"]}):
        records = [run["results"][name] for run in stack_runs if name in run["results"]]
        entry = {}
        for field in STEP_FIELDS:
            values = [r[field] for r in records if r.get(field) is not None]
            if values:
                entry[field] = statistics.median(values)
                entry[f"{field}_runs"] = values
        losses = [r["loss"] for r in records if "loss" in r]
        if losses:
            entry["loss"] = losses[-1]
        for label, runs in (("fresh", fresh_runs), ("cached", cached_runs)):
            for field in ("first_step_s", "first_encode_s"):
                values = [run["results"].get(name, {}).get(field) for run in runs]
                values = [v for v in values if v is not None]
                if values:
                    entry.setdefault(field, {})[label] = statistics.median(values)
        summary[name] = entry
    return summary


def add_rates(summary, batch_size, peak):
    """Tokens/s, TFLOP/s of the median step and its share of the matrix-product rate `peak`.

    Tokens: the batch's sentences' (batch x length; each is encoded twice).
    """
    for name, entry in summary.items():
        shape, _, length = name.split("/")
        if entry.get("ms_per_step"):
            seconds = entry["ms_per_step"] / 1000
            flops = step_flops(shape, batch_size, int(length))
            entry["tokens_per_s"] = batch_size * int(length) / seconds
            entry["tflops"] = flops / seconds / 1e12
            if peak:
                entry["share_of_peak"] = entry["tflops"] / peak


def speed_ratio(summaries, other, name):
    """kcse's steps/s over the other stack's (> 1: kcse faster), or None."""
    mine = summaries.get("kcse", {}).get(name, {}).get("ms_per_step")
    theirs = summaries.get(other, {}).get(name, {}).get("ms_per_step")
    return None if not mine or not theirs else theirs / mine


def targets(report, args):
    """Each GPU target: its figure, the bound and whether it holds (None: not measured)."""
    summaries = {stack: entry["summary"] for stack, entry in report["stacks"].items()}
    checks = []
    for other, length, least in SPEED_TARGETS:
        name = key(args.shape, "bfloat16", length)
        value = speed_ratio(summaries, other, name)
        checks.append({"target": f"kcse step speed / {STACK_LABELS[other]} at {name}",
                       "value": value, "bound": f">= {least}",
                       "holds": None if value is None else value >= least})
    cell = report["stacks"].get("kcse", {}).get("cell")
    programs = cell and cell["train_programs"]
    checks.append({"target": "kcse train programs in one STS-B cell", "value": programs,
                   "bound": f"<= {MAX_TRAIN_PROGRAMS}",
                   "holds": None if programs is None else programs <= MAX_TRAIN_PROGRAMS})
    minutes = report["projection"]["stacks"].get("kcse", {}).get("minutes", {}).get("cache")
    checks.append({"target": "projected Su grid, kcse with cache (minutes)", "value": minutes,
                   "bound": f"<= {MAX_GRID_MINUTES}",
                   "holds": None if minutes is None else minutes <= MAX_GRID_MINUTES})
    return checks


def fmt(value, spec=".1f", width=9):
    return f"{'-' if value is None else format(value, spec):>{width}}"


def row_names(report, args):
    names = [key(args.shape, p, n) for p in args.precisions for n in args.lengths]
    measured = {n for entry in report["stacks"].values() for n in entry["summary"]}
    return names + sorted(measured - set(names))


def print_header(report, args):
    device = report["device"]
    rates = device["matmul_tflops"]
    print(f"\ndevice (torch): {device['name']} [{device['device']}]; {device['matmul_size']}^3 "
          f"matrix product: bfloat16 {rates['bfloat16']:.3g} TFLOP/s, float32 (TF32 allowed) "
          f"{rates['float32']:.3g} TFLOP/s")
    for stack, entry in report["stacks"].items():
        info = entry["info"]
        if stack == "kcse":
            extra = (f"; keras {info['keras']}, keras-hub {info['keras_hub']}; JAX default "
                     f"matmul precision {info['jax_default_matmul_precision']}; TensorFlow "
                     f"imported: {'yes' if info['tensorflow_imported'] else 'no'}")
        else:
            extra = (f"; transformers {info['transformers']}, attention {info['attention']}, "
                     f"TF32 {info['tf32']['cuda.matmul.allow_tf32']}")
        print(f"{STACK_LABELS[stack]}: {info['backend']} on {info['device_name']}{extra}")
    for stack, reason in report["skipped_stacks"].items():
        print(f"{STACK_LABELS[stack]}: not run ({reason})")
    for stack in report["failed_stacks"]:
        print(f"{stack}: FAILED (its log is in --logs; the end of its stderr in the JSON)")
    s = SHAPES[args.shape]
    print(f"\nmodel: {s['layers']} layers, hidden {s['hidden']}, {s['heads']} heads, intermediate "
          f"{s['intermediate']}, vocabulary {args.vocabulary}; batch {args.batch_size} "
          f"({2 * args.batch_size} rows), {args.steps} steps an epoch; medians of "
          f"{report['runs_completed']} run(s) per stack, alternated; random weights and ids")


def print_steps(report, args, names):
    ran = [stack for stack in STACKS if stack in report["stacks"]]
    summaries = {stack: report["stacks"][stack]["summary"] for stack in ran}
    peak = report["peak"]
    print(f"\ntraining step per stack: ms median [min, p90]; tokens/s; TFLOP/s (share of the "
          f"measured {peak['dtype']} matrix product, {peak['tflops']:.3g} TFLOP/s); kcse's speed "
          f"over each (steps/s; > 1: kcse faster); encoding (batch {args.encode_batch_size}, "
          "full length; kcse: keras.Model.predict; HF: eval, inference_mode)")
    for name in names:
        print(name)
        for stack in ran:
            e = summaries[stack].get(name, {})
            if "ms_per_step" not in e:
                continue
            share = f" ({100 * e['share_of_peak']:.0f}%)" if e.get("share_of_peak") else ""
            ratio = speed_ratio(summaries, stack, name) if stack != "kcse" else None
            print(f"  {STACK_LABELS[stack]:<14}{e['ms_per_step']:9.2f} [{e['ms_min']:.2f}, "
                  f"{e['ms_p90']:.2f}]{e['tokens_per_s']:12.0f} tok/s{e['tflops']:9.3g} TFLOP/s"
                  f"{share}" + ("" if ratio is None else f"   kcse speed x{ratio:.2f}")
                  + ("" if e.get("encode_sentences_per_s") is None
                     else f"; encodes {e['encode_sentences_per_s']:.0f} sentences/s"))


def print_first_steps(report, names):
    ran = [stack for stack in STACKS if stack in report["stacks"]]
    print("\nseconds to the first step (compilation included), fresh / from the cache "
          "(kcse: JAX persistent cache; torch.compile: inductor cache; HF eager: no compiler, "
          "a second process); first encoded batch in ()")
    print(f"{'':<24}" + "".join(f"{STACK_LABELS[stack]:>30}" for stack in ran))
    for name in names:
        row = f"{name:<24}"
        for stack in ran:
            entry = report["stacks"][stack]["summary"].get(name, {})
            parts = []
            for label in ("fresh", "cached"):
                step = entry.get("first_step_s", {}).get(label)
                encode = entry.get("first_encode_s", {}).get(label)
                parts.append("-" if step is None else f"{step:.3g}" + (
                    "" if encode is None else f" ({encode:.2g})"))
            row += f"{' / '.join(parts):>30}"
        print(row)


def print_projection(projection, cell, args):
    shapes = len(set(projection["models"].values()))
    print(f"\nprojection of Su's full grid ({projection['cells']} cells: "
          f"{len(projection['models'])} checkpoints as {shapes} shapes x P1-P4, no P2 without "
          f"a pooler, x {', '.join(projection['tasks'])}; "
          f"protocol 'su'; {projection['precision']}), minutes:")
    if cell:
        print(f"  kcse, one STS-B cell measured: {cell['sentences']} sentences (mean "
              f"{cell['mean_tokens']:.1f} tokens, longest {cell['longest']}), batch "
              f"{cell['batch_size']}, length {cell['length']}: {cell['steps']} steps, "
              f"{cell['train_programs']} train program(s) {cell['traced_shapes']}, fit "
              f"{cell['fit_s']:.1f} s")
    for task, plan in projection["cell_plans"].items():
        print(f"  {task:<6} length {plan['length']}, {plan['training_sentences']} training "
              f"sentences: {plan['steps']} steps; encodes {plan['raw_encoded']} (a, b) and "
              f"{plan['test_encoded']} per cell (c)")
    for stack, result in projection["stacks"].items():
        minutes = result["minutes"]
        for name, label in (("total", "no compiler"), ("no_cache", "no cache"),
                            ("cache", "with cache")):
            if name in minutes:
                parts = minutes[f"{name}_parts"]
                print(f"  {STACK_LABELS[stack]:<14} {minutes[name]:8.1f}  {label} (train "
                      f"{parts['train']:.1f}, encode {parts['encode']:.1f}, compile "
                      f"{parts['compile']:.1f})")
        if "cache_if_train_shapes_repeat" in minutes:
            print(f"  {'':<14} {minutes['cache_if_train_shapes_repeat']:8.1f}  with cache, if "
                  "kcse's train programs repeated (its embedding-row copy, CPU only)")
    for note in projection["notes"]:
        print(f"  {note}")
    if args.tiny:
        print("  (--tiny: a smoke configuration, so the minutes mean nothing)")


def print_report(report, args):
    names = row_names(report, args)
    print_header(report, args)
    print_steps(report, args, names)
    print_first_steps(report, names)
    print_projection(report["projection"], report["stacks"].get("kcse", {}).get("cell"), args)
    print("\ntargets (issue 43; on a GPU, bfloat16):")
    for check in report["targets"]:
        verdict = {True: "holds", False: "MISSED", None: "not measured"}[check["holds"]]
        value = check["value"]
        shown = "-" if value is None else f"{value:.2f}" if isinstance(value, float) else value
        print(f"  {check['target']}: {shown} "
              f"({check['bound']}): {verdict}")
