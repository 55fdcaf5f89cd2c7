"""Evaluation of sentence encoders."""

from kcse.evaluation.sts import evaluate_sts
from kcse.evaluation.sts_evaluator import STSEvaluator
