"""Sentence data: pair files, the comparison's tasks, NLI, TFDS builders, checksums.

- `read_pairs(path)`: one file of sentence pairs with gold scores, in the
  senteval_cn layout (`s1\\ts2\\tlabel`), stsb-multi-mt CSV, SemEval STS12–16
  TSV or SICK (`sentence_pairs.py`).
- `read_chinese_task(data_dir, task, split)`: Su Jianlin's Chinese tasks
  (`CHINESE_TASKS`), `<TASK>/<TASK>.{train,valid,test}.data`, with label
  scale checks; `BUNDLED_CHINESE_STS` is a `data_dir` holding the Chinese
  STS-B shipped with kcse (`chinese.py`).
- `read_english_sts(data_dir, name)`: STS12–16 (pooled sub-corpora), STS-B,
  SICK-R; `read_stsb_multi_mt(data_dir, language, split)` (`english.py`).
- `read_nli(path)` and `nli_triplets(...)`: SNLI / CNSD JSON lines (`nli.py`).
- `read_sentence_file(path)`: a text file of training sentences, one a
  line (`--train-file`; `sentence_file.py`).
- `file_checksum(path)`, `verify_card(card, data_dir)`: SHA-256 against a
  data card (`checksums.py`).
- CLEAR's text views (`text_views.py`): `WordDeletion`, `SpanDeletion`,
  `Reordering`, `SynonymSubstitution`, each `view(text, rng)`;
  `text_view_from_spec("word_deletion:0.7")`, `text_view_pairs(sentences, a, b,
  seed)` (`text_view_specs.py`), `read_synonym_table(path)` (`synonym_table.py`).
- TFDS builders, one per file in `tfds/`: `ChineseSts`, `StsbMultiMt`,
  `StsEn`, `NliZh`, `Snli` (TensorFlow Datasets is imported on first use).

A new dataset gets a reader here (built on `read_pairs` where it is a pair
file), a builder in `tfds/` and a card in `data_cards/`.
"""

from kcse.public_api import exports

__all__, __getattr__, __dir__ = exports(__name__)
