"""`sts_en`: English SemEval STS 2012–2016 and SICK-R test sets."""

import textwrap

import numpy as np
import tensorflow_datasets as tfds

from kcse.data import english
from kcse.data.tfds.builder_base import RELEASE_NOTES
from kcse.data.tfds.builder_base import VERSION
from kcse.data.tfds.builder_base import Builder
from kcse.data.tfds.builder_base import download
from kcse.data.tfds.builder_base import local_file
from kcse.data.tfds.builder_base import manual_dir_or_none
from kcse.data.tfds.builder_base import pair_features
from kcse.data.tfds.builder_base import similarity_examples

_STS_CITATIONS = {
    "STS12": """\
@inproceedings{agirre-etal-2012-semeval,
  title = {{S}em{E}val-2012 Task 6: A Pilot on Semantic Textual Similarity},
  author = {Agirre, Eneko and Cer, Daniel and Diab, Mona and Gonzalez-Agirre, Aitor},
  booktitle = {*SEM 2012},
  year = {2012}
}""",
    "STS13": """\
@inproceedings{agirre-etal-2013-sem,
  title = {*{SEM} 2013 shared task: Semantic Textual Similarity},
  author = {Agirre, Eneko and Cer, Daniel and Diab, Mona and Gonzalez-Agirre, Aitor and Guo, Weiwei},
  booktitle = {*SEM 2013},
  year = {2013}
}""",
    "STS14": """\
@inproceedings{agirre-etal-2014-semeval,
  title = {{S}em{E}val-2014 Task 10: Multilingual Semantic Textual Similarity},
  author = {Agirre, Eneko and others},
  booktitle = {SemEval 2014},
  year = {2014}
}""",
    "STS15": """\
@inproceedings{agirre-etal-2015-semeval,
  title = {{S}em{E}val-2015 Task 2: Semantic Textual Similarity, {E}nglish, {S}panish and Pilot on Interpretability},
  author = {Agirre, Eneko and others},
  booktitle = {SemEval 2015},
  year = {2015}
}""",
    "STS16": """\
@inproceedings{agirre-etal-2016-semeval,
  title = {{S}em{E}val-2016 Task 1: Semantic Textual Similarity, Monolingual and Cross-Lingual Evaluation},
  author = {Agirre, Eneko and others},
  booktitle = {SemEval 2016},
  year = {2016}
}""",
    "SICK": """\
@inproceedings{marelli-etal-2014-sick,
  title = {A {SICK} cure for the evaluation of compositional distributional semantic models},
  author = {Marelli, Marco and Menini, Stefano and Baroni, Marco and Bentivogli, Luisa and Bernardi, Raffaella and Zamparelli, Roberto},
  booktitle = {Proceedings of LREC 2014},
  year = {2014}
}""",
}


class StsEn(Builder):
    """English SemEval STS 2012–2016 test sets and SICK-R test.

    STS12–16: every sub-corpus of the year pooled into one `test` split (the
    "all" setting of princeton-nlp/SimCSE), pairs without gold left out, with
    the sub-corpus in `subcorpus`. SICK: the 4,927 test pairs, relatedness
    1–5. Files missing from the manual folder are downloaded from
    brmson/dataset-sts on GitHub.

    Example:
    ```python
    import pathlib

    import tensorflow_datasets as tfds

    import kcse

    # A real manual folder holds brmson/dataset-sts's files; here one tiny
    # STS16 sub-corpus in its layout (sts_en/STS16/*.test.tsv).
    pathlib.Path("manual/sts_en/STS16").mkdir(parents=True)
    pathlib.Path("manual/sts_en/STS16/headlines.test.tsv").write_text(
        "4.0\\tStocks fall in Tokyo.\\tTokyo stocks drop.\\n"
        "0.5\\tA cat sleeps.\\tIt rains in Paris.\\n", encoding="utf-8")
    builder = kcse.data.StsEn(config="STS16", data_dir="tfds")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir="manual"))
    rows = list(tfds.as_numpy(builder.as_dataset(split="test")))
    [(row["subcorpus"].decode(), float(row["score"])) for row in rows]
    # [('headlines', 4.0), ('headlines', 0.5)]
    ```
    """

    VERSION = VERSION
    RELEASE_NOTES = RELEASE_NOTES
    DATA_CARD = "sts_en.md"
    BUILDER_CONFIGS = [
        tfds.core.BuilderConfig(
            name=name,
            description=(
                f"SemEval {name} English test sub-corpora, pooled."
                if name != "SICK" else "SICK test, relatedness 1-5 (SICK-R)."
            ),
        )
        for name in english.STS_YEARS + ("SICK",)
    ]
    MANUAL_DOWNLOAD_INSTRUCTIONS = textwrap.dedent("""\
        Optional (the files are downloaded from GitHub otherwise): put the
        brmson/dataset-sts files (https://github.com/brmson/dataset-sts,
        data/sts/semeval-sts/<year>/*.test.tsv and data/sts/sick2014/) in

            <manual_dir>/sts_en/STS12 ... STS16/<sub-corpus>.test.tsv
            <manual_dir>/sts_en/SICK/SICK_test_annotated.txt

        (or <manual_dir>/STS12/..., <manual_dir>/SICK/...).
        """)

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description=(
                "English STS evaluation data as used by SentEval and SimCSE: "
                + self.builder_config.description
                + " Scores 0-5 (SICK 1-5). Data card: data_cards/sts_en.md."
            ),
            features=pair_features(
                {"score": np.float32}, {"subcorpus": tfds.features.Text()}
            ),
            homepage=english.STS_EN_SOURCE,
            citation=_STS_CITATIONS[self.builder_config.name],
            license=(
                "CC BY-NC-SA 3.0 (SICK)" if self.builder_config.name == "SICK"
                else "Per sub-corpus licences of the SemEval releases "
                "(data_cards/sts_en.md)."
            ),
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        name = self.builder_config.name
        root = manual_dir_or_none(dl_manager)
        if name == "SICK":
            file = english.SICK_FILES["test"]
            path = local_file(root, [f"sts_en/SICK/{file}", f"SICK/{file}", file])
            if path is None:
                path = download(
                    dl_manager, english.sts_file_urls("SICK-R")[file], root, "SICK test"
                )
            return {"test": self._generate_examples(sick=path)}
        files = {}
        for folder in ("sts_en/" + name, name):
            if root is not None and sorted((root / folder).glob("*.test.tsv")):
                files = {p.name: p for p in sorted((root / folder).glob("*.test.tsv"))}
                break
        if not files:
            files = download(dl_manager, english.sts_file_urls(name), root, name)
        return {"test": self._generate_examples(sts=files)}

    def _generate_examples(self, sts=None, sick=None):
        if sick is not None:
            pairs = english.read_sick_file(sick)
            yield from similarity_examples(
                pairs, "score", lambda i: {"subcorpus": "SICK"}
            )
            return
        names = sorted(sts)
        pooled = english.read_sts_files(
            [sts[n] for n in names],
            names=[n.removesuffix(".tsv").removesuffix(".test") for n in names],
        )
        corpus = [name for name, part in pooled.parts.items() for _ in range(len(part))]
        yield from similarity_examples(
            pooled, "score", lambda i: {"subcorpus": corpus[i]}
        )
