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

from kcse.foundation.lazy_exports import lazy_exports

_EXPORTS = {
    "read_pairs": "kcse.data.sentence_pairs",
    "SentencePairs": "kcse.data.sentence_pairs",
    "MalformedLineError": "kcse.data.sentence_pairs",
    "read_chinese_task": "kcse.data.chinese",
    "chinese_task_path": "kcse.data.chinese",
    "LabelScaleError": "kcse.data.chinese",
    "CHINESE_TASKS": "kcse.data.chinese",
    "CHINESE_SPLITS": "kcse.data.chinese",
    "LABEL_SCALES": "kcse.data.chinese",
    "SPLIT_SIZES": "kcse.data.chinese",
    "BUNDLED_CHINESE_STS": "kcse.data.chinese",
    "read_english_sts": "kcse.data.english",
    "read_stsb_multi_mt": "kcse.data.english",
    "PooledSentencePairs": "kcse.data.english",
    "ENGLISH_STS": "kcse.data.english",
    "STS_YEARS": "kcse.data.english",
    "STSB_MULTI_MT_LANGUAGES": "kcse.data.english",
    "STSB_MULTI_MT_SPLITS": "kcse.data.english",
    "read_nli": "kcse.data.nli",
    "nli_triplets": "kcse.data.nli",
    "NLIPairs": "kcse.data.nli",
    "NLITriplets": "kcse.data.nli",
    "NLI_LABELS": "kcse.data.nli",
    "read_sentence_file": "kcse.data.sentence_file",
    "SentenceFile": "kcse.data.sentence_file",
    "file_checksum": "kcse.data.checksums",
    "verify_card": "kcse.data.checksums",
    "WordDeletion": "kcse.data.text_views",
    "SpanDeletion": "kcse.data.text_views",
    "Reordering": "kcse.data.text_views",
    "SynonymSubstitution": "kcse.data.text_views",
    "text_view_from_spec": "kcse.data.text_view_specs",
    "text_view_pairs": "kcse.data.text_view_specs",
    "read_synonym_table": "kcse.data.synonym_table",
    "TEXT_VIEWS": "kcse.data.text_view_specs",
    "DEFAULT_RATES": "kcse.data.text_view_specs",
    "ChineseSts": "kcse.data.tfds",
    "StsbMultiMt": "kcse.data.tfds",
    "StsEn": "kcse.data.tfds",
    "NliZh": "kcse.data.tfds",
    "Snli": "kcse.data.tfds",
    "tfds": "kcse.data.tfds",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
