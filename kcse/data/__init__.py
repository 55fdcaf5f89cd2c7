"""Reading sentence data."""

from kcse.data.sentence_pairs import MalformedLineError
from kcse.data.sentence_pairs import SentencePairs
from kcse.data.sentence_pairs import read_pairs
