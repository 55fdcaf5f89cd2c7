"""The names of SG-OPT's losses, without Keras, for the argument checks.

`kcse.losses.SelfGuidedLoss(variant=...)` computes them: L^opt3 (SG-OPT)
and the ablation's L^opt2, L^opt1 and L^base (SG), in the order of the
paper's ablation table.
"""

VARIANTS = ("opt3", "opt2", "opt1", "base")
