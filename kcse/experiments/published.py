"""Su Jianlin's published Chinese SimCSE table, stored as a Python literal.

Source: Su Jianlin (苏剑林), "SimCSE in Chinese", https://kexue.fm/archives/8348,
26 April 2021; code at https://github.com/bojone/SimCSE.

Each cell is ``(a, b, c)``, Spearman correlation x100 between gold scores and
cosine similarities of sentence-pair embeddings:

* ``a``: the raw pretrained encoder, no post-processing;
* ``b``: BERT-whitening of the same embeddings (no dimensionality reduction);
* ``c``: unsupervised SimCSE (batch size 64, learning rate 1e-5, dropout 0.3,
  one epoch over 10,000 randomly drawn sentences of the task's own data).

In the article ``c`` is coloured green when ``c > b`` and red otherwise.

Poolings are Su's P1..P4, the aliases of ``kcse.layers.sentence_pooling``:
P1 = cls, P2 = pooler ([CLS] + the pretrained pooler Dense), P3 = last_avg,
P4 = first_last_avg. WoBERT and RoFormer have no P2 cells ("-" in the article;
kcse's WoBERT checkpoint has no pooler either): those ten cells are ``None``.

Su does not state which split (dev or test) the numbers were computed on, and
says reruns fluctuate because of dropout and the random 10,000-sentence
sample. kcse therefore labels its own numbers with the split they come from
and treats this table as a reference, not as an exact target.

The literal was generated once from the article's LaTeX ``array``; the package
does not read the article at run time. ``tests/experiments/published_test.py``
re-parses the article independently, when it is available, and checks it
equals this literal.

>>> published_cell("BERT", "P1", "ATEC")
(16.59, 20.61, 33.14)
>>> published_cell("WoBERT", "P2", "BQ") is None
True
>>> published_cell("multilingual-e5-small", "P4", "BQ") is None
True
"""

from kcse.layers.pooling_rules import SU_POOLINGS
from kcse.models.model_sources import SU_MODELS

# Keys: (one of SU_MODELS, one of SU_POOLINGS, one of kcse.data.chinese.CHINESE_TASKS).
SU_SIMCSE_TABLE = {
    ("BERT", "P1", "ATEC"): (16.59, 20.61, 33.14),
    ("BERT", "P1", "BQ"): (29.35, 25.76, 50.67),
    ("BERT", "P1", "LCQMC"): (41.71, 48.92, 69.99),
    ("BERT", "P1", "PAWSX"): (15.15, 17.03, 12.95),
    ("BERT", "P1", "STS-B"): (34.65, 61.19, 69.04),
    ("BERT", "P2", "ATEC"): (9.46, 22.16, 25.18),
    ("BERT", "P2", "BQ"): (16.97, 18.97, 41.19),
    ("BERT", "P2", "LCQMC"): (28.42, 49.61, 56.45),
    ("BERT", "P2", "PAWSX"): (13.93, 16.08, 12.46),
    ("BERT", "P2", "STS-B"): (21.66, 60.75, 57.63),
    ("BERT", "P3", "ATEC"): (20.79, 18.27, 32.89),
    ("BERT", "P3", "BQ"): (33.08, 22.58, 49.58),
    ("BERT", "P3", "LCQMC"): (59.22, 60.12, 71.83),
    ("BERT", "P3", "PAWSX"): (16.68, 18.37, 14.47),
    ("BERT", "P3", "STS-B"): (57.48, 63.97, 70.08),
    ("BERT", "P4", "ATEC"): (24.51, 27.00, 31.96),
    ("BERT", "P4", "BQ"): (38.81, 32.29, 48.40),
    ("BERT", "P4", "LCQMC"): (64.75, 64.75, 71.49),
    ("BERT", "P4", "PAWSX"): (15.12, 17.80, 16.01),
    ("BERT", "P4", "STS-B"): (61.66, 69.45, 70.03),
    ("RoBERTa", "P1", "ATEC"): (24.61, 29.59, 32.23),
    ("RoBERTa", "P1", "BQ"): (40.54, 28.95, 50.61),
    ("RoBERTa", "P1", "LCQMC"): (70.55, 70.82, 74.22),
    ("RoBERTa", "P1", "PAWSX"): (16.23, 17.99, 12.25),
    ("RoBERTa", "P1", "STS-B"): (66.91, 69.19, 71.13),
    ("RoBERTa", "P2", "ATEC"): (20.61, 28.91, 20.07),
    ("RoBERTa", "P2", "BQ"): (31.14, 27.48, 39.92),
    ("RoBERTa", "P2", "LCQMC"): (65.43, 70.62, 62.65),
    ("RoBERTa", "P2", "PAWSX"): (15.71, 17.30, 12.00),
    ("RoBERTa", "P2", "STS-B"): (59.50, 70.77, 61.49),
    ("RoBERTa", "P3", "ATEC"): (26.94, 29.94, 32.66),
    ("RoBERTa", "P3", "BQ"): (40.71, 30.95, 51.03),
    ("RoBERTa", "P3", "LCQMC"): (66.80, 68.00, 73.15),
    ("RoBERTa", "P3", "PAWSX"): (16.08, 19.01, 16.47),
    ("RoBERTa", "P3", "STS-B"): (61.67, 66.19, 70.14),
    ("RoBERTa", "P4", "ATEC"): (27.94, 28.33, 32.40),
    ("RoBERTa", "P4", "BQ"): (43.09, 33.49, 49.78),
    ("RoBERTa", "P4", "LCQMC"): (68.43, 67.86, 72.74),
    ("RoBERTa", "P4", "PAWSX"): (15.02, 17.91, 16.39),
    ("RoBERTa", "P4", "STS-B"): (64.09, 69.74, 70.11),
    ("NEZHA", "P1", "ATEC"): (17.39, 18.83, 32.14),
    ("NEZHA", "P1", "BQ"): (29.63, 21.94, 46.08),
    ("NEZHA", "P1", "LCQMC"): (40.60, 50.52, 60.38),
    ("NEZHA", "P1", "PAWSX"): (14.90, 18.15, 16.60),
    ("NEZHA", "P1", "STS-B"): (35.84, 60.84, 68.50),
    ("NEZHA", "P2", "ATEC"): (10.96, 23.08, 15.70),
    ("NEZHA", "P2", "BQ"): (17.38, 28.81, 32.20),
    ("NEZHA", "P2", "LCQMC"): (22.66, 49.12, 21.07),
    ("NEZHA", "P2", "PAWSX"): (13.45, 18.05, 12.68),
    ("NEZHA", "P2", "STS-B"): (21.16, 60.11, 43.35),
    ("NEZHA", "P3", "ATEC"): (23.70, 21.93, 31.47),
    ("NEZHA", "P3", "BQ"): (35.44, 22.44, 46.69),
    ("NEZHA", "P3", "LCQMC"): (60.94, 62.10, 69.65),
    ("NEZHA", "P3", "PAWSX"): (18.35, 21.72, 18.17),
    ("NEZHA", "P3", "STS-B"): (60.35, 68.57, 70.68),
    ("NEZHA", "P4", "ATEC"): (27.72, 25.31, 30.26),
    ("NEZHA", "P4", "BQ"): (44.18, 31.47, 46.57),
    ("NEZHA", "P4", "LCQMC"): (65.16, 66.68, 67.21),
    ("NEZHA", "P4", "PAWSX"): (13.98, 16.66, 14.41),
    ("NEZHA", "P4", "STS-B"): (61.94, 69.55, 68.18),
    ("WoBERT", "P1", "ATEC"): (23.88, 22.45, 32.66),
    ("WoBERT", "P1", "BQ"): (43.08, 32.52, 49.13),
    ("WoBERT", "P1", "LCQMC"): (68.56, 67.89, 72.99),
    ("WoBERT", "P1", "PAWSX"): (18.15, 19.92, 12.36),
    ("WoBERT", "P1", "STS-B"): (64.12, 66.53, 70.00),
    ("WoBERT", "P2", "ATEC"): None,
    ("WoBERT", "P2", "BQ"): None,
    ("WoBERT", "P2", "LCQMC"): None,
    ("WoBERT", "P2", "PAWSX"): None,
    ("WoBERT", "P2", "STS-B"): None,
    ("WoBERT", "P3", "ATEC"): (24.62, 22.74, 34.03),
    ("WoBERT", "P3", "BQ"): (40.64, 28.12, 49.77),
    ("WoBERT", "P3", "LCQMC"): (64.89, 65.22, 72.44),
    ("WoBERT", "P3", "PAWSX"): (16.83, 20.56, 14.55),
    ("WoBERT", "P3", "STS-B"): (59.43, 66.57, 70.96),
    ("WoBERT", "P4", "ATEC"): (25.97, 27.24, 33.67),
    ("WoBERT", "P4", "BQ"): (42.37, 32.34, 49.09),
    ("WoBERT", "P4", "LCQMC"): (66.53, 65.62, 71.74),
    ("WoBERT", "P4", "PAWSX"): (15.54, 18.85, 14.00),
    ("WoBERT", "P4", "STS-B"): (61.37, 68.11, 70.00),
    ("RoFormer", "P1", "ATEC"): (24.29, 26.04, 32.33),
    ("RoFormer", "P1", "BQ"): (41.91, 28.13, 49.13),
    ("RoFormer", "P1", "LCQMC"): (64.87, 60.92, 71.61),
    ("RoFormer", "P1", "PAWSX"): (20.15, 23.08, 15.25),
    ("RoFormer", "P1", "STS-B"): (59.91, 66.96, 69.45),
    ("RoFormer", "P2", "ATEC"): None,
    ("RoFormer", "P2", "BQ"): None,
    ("RoFormer", "P2", "LCQMC"): None,
    ("RoFormer", "P2", "PAWSX"): None,
    ("RoFormer", "P2", "STS-B"): None,
    ("RoFormer", "P3", "ATEC"): (24.09, 28.51, 34.23),
    ("RoFormer", "P3", "BQ"): (39.09, 34.92, 50.01),
    ("RoFormer", "P3", "LCQMC"): (63.55, 63.85, 72.01),
    ("RoFormer", "P3", "PAWSX"): (16.53, 18.43, 15.25),
    ("RoFormer", "P3", "STS-B"): (58.98, 55.30, 71.44),
    ("RoFormer", "P4", "ATEC"): (25.92, 27.38, 34.10),
    ("RoFormer", "P4", "BQ"): (41.75, 32.36, 49.58),
    ("RoFormer", "P4", "LCQMC"): (66.18, 65.45, 71.84),
    ("RoFormer", "P4", "PAWSX"): (15.30, 18.36, 15.17),
    ("RoFormer", "P4", "STS-B"): (61.40, 68.02, 71.40),
    ("SimBERT", "P1", "ATEC"): (38.50, 23.64, 36.98),
    ("SimBERT", "P1", "BQ"): (48.54, 31.78, 51.47),
    ("SimBERT", "P1", "LCQMC"): (76.23, 75.05, 74.87),
    ("SimBERT", "P1", "PAWSX"): (15.10, 18.49, 12.66),
    ("SimBERT", "P1", "STS-B"): (74.14, 73.37, 75.12),
    ("SimBERT", "P2", "ATEC"): (38.93, 27.06, 37.00),
    ("SimBERT", "P2", "BQ"): (49.93, 35.38, 50.33),
    ("SimBERT", "P2", "LCQMC"): (75.56, 73.45, 72.61),
    ("SimBERT", "P2", "PAWSX"): (14.52, 18.51, 19.72),
    ("SimBERT", "P2", "STS-B"): (73.18, 73.43, 75.13),
    ("SimBERT", "P3", "ATEC"): (36.50, 31.32, 37.81),
    ("SimBERT", "P3", "BQ"): (45.78, 29.17, 51.24),
    ("SimBERT", "P3", "LCQMC"): (74.42, 73.79, 73.85),
    ("SimBERT", "P3", "PAWSX"): (15.33, 18.39, 12.48),
    ("SimBERT", "P3", "STS-B"): (67.31, 70.70, 73.18),
    ("SimBERT", "P4", "ATEC"): (33.53, 29.04, 36.93),
    ("SimBERT", "P4", "BQ"): (45.28, 34.70, 50.09),
    ("SimBERT", "P4", "LCQMC"): (73.20, 71.22, 73.42),
    ("SimBERT", "P4", "PAWSX"): (14.16, 17.32, 16.59),
    ("SimBERT", "P4", "STS-B"): (66.98, 70.55, 72.64),
    ("SimBERT-small", "P1", "ATEC"): (30.68, 27.56, 31.16),
    ("SimBERT-small", "P1", "BQ"): (43.41, 30.89, 44.80),
    ("SimBERT-small", "P1", "LCQMC"): (74.73, 73.21, 74.32),
    ("SimBERT-small", "P1", "PAWSX"): (15.89, 17.96, 14.69),
    ("SimBERT-small", "P1", "STS-B"): (70.54, 71.39, 69.85),
    ("SimBERT-small", "P2", "ATEC"): (31.00, 29.14, 30.76),
    ("SimBERT-small", "P2", "BQ"): (43.76, 36.86, 45.50),
    ("SimBERT-small", "P2", "LCQMC"): (74.21, 73.14, 74.55),
    ("SimBERT-small", "P2", "PAWSX"): (16.17, 18.12, 15.18),
    ("SimBERT-small", "P2", "STS-B"): (70.10, 71.40, 69.18),
    ("SimBERT-small", "P3", "ATEC"): (30.03, 21.24, 30.07),
    ("SimBERT-small", "P3", "BQ"): (43.72, 31.69, 44.27),
    ("SimBERT-small", "P3", "LCQMC"): (72.12, 70.27, 71.21),
    ("SimBERT-small", "P3", "PAWSX"): (16.93, 21.68, 12.10),
    ("SimBERT-small", "P3", "STS-B"): (66.55, 66.11, 64.95),
    ("SimBERT-small", "P4", "ATEC"): (29.52, 28.41, 28.56),
    ("SimBERT-small", "P4", "BQ"): (43.52, 36.56, 43.38),
    ("SimBERT-small", "P4", "LCQMC"): (70.33, 68.75, 68.35),
    ("SimBERT-small", "P4", "PAWSX"): (15.39, 21.57, 14.47),
    ("SimBERT-small", "P4", "STS-B"): (64.73, 68.12, 63.23),
    ("SimBERT-tiny", "P1", "ATEC"): (30.51, 24.67, 30.04),
    ("SimBERT-tiny", "P1", "BQ"): (44.25, 31.75, 43.89),
    ("SimBERT-tiny", "P1", "LCQMC"): (74.27, 72.25, 73.47),
    ("SimBERT-tiny", "P1", "PAWSX"): (16.01, 18.07, 12.51),
    ("SimBERT-tiny", "P1", "STS-B"): (70.11, 66.39, 70.11),
    ("SimBERT-tiny", "P2", "ATEC"): (30.01, 27.66, 29.37),
    ("SimBERT-tiny", "P2", "BQ"): (44.47, 37.33, 44.04),
    ("SimBERT-tiny", "P2", "LCQMC"): (73.98, 72.31, 72.93),
    ("SimBERT-tiny", "P2", "PAWSX"): (16.55, 18.15, 13.73),
    ("SimBERT-tiny", "P2", "STS-B"): (70.35, 70.88, 69.63),
    ("SimBERT-tiny", "P3", "ATEC"): (28.47, 19.68, 28.08),
    ("SimBERT-tiny", "P3", "BQ"): (42.04, 29.49, 41.21),
    ("SimBERT-tiny", "P3", "LCQMC"): (69.16, 66.99, 69.85),
    ("SimBERT-tiny", "P3", "PAWSX"): (16.18, 20.11, 12.21),
    ("SimBERT-tiny", "P3", "STS-B"): (64.41, 66.72, 64.62),
    ("SimBERT-tiny", "P4", "ATEC"): (27.77, 27.67, 26.25),
    ("SimBERT-tiny", "P4", "BQ"): (41.76, 37.02, 41.62),
    ("SimBERT-tiny", "P4", "LCQMC"): (67.55, 65.66, 67.34),
    ("SimBERT-tiny", "P4", "PAWSX"): (15.06, 20.49, 13.87),
    ("SimBERT-tiny", "P4", "STS-B"): (62.92, 66.77, 60.80),
}


def published_cell(model, pooling, task):
    """Su's ``(raw, whitening, simcse)`` Spearman x100 for one cell, or None.

    None means there is no published number: an unknown model (any model
    outside Su's table), an unknown pooling or task, or one of the "-" cells
    (WoBERT / RoFormer with P2).

    >>> published_cell("SimBERT-tiny", "P4", "STS-B")
    (62.92, 66.77, 60.8)
    """
    return SU_SIMCSE_TABLE.get((model, pooling, task))


def published_reference(tasks):
    """Su's published cells for `tasks`, as lines of text."""
    lines = [f"Su Jianlin's published a / b / c for {', '.join(tasks)}:"]
    for model in SU_MODELS:
        for pooling in SU_POOLINGS:
            cells = [published_cell(model, pooling, task) for task in tasks]
            text = "  ".join(
                f"{task} " + ("-" if cell is None else " / ".join(f"{v:.2f}" for v in cell))
                for task, cell in zip(tasks, cells)
            )
            lines.append(f"  {model}-{pooling}: {text}")
    return "\n".join(lines)
