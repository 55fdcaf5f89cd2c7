"""The model names the grid and the `kcse` command accept, checked early.

Light on purpose (no Keras): the commands check `--model`/`--models` with
`check_model` before TensorFlow starts; `kcse.experiments.grid` resolves
and loads them.
"""

from kcse import arguments
from kcse.checkpoint_families import FAMILIES

# Su's models: checkpoint folder names (as released) and kcse family.
SU_CHECKPOINTS = {
    "BERT": ("chinese_L-12_H-768_A-12", "bert"),
    "RoBERTa": ("chinese_roberta_wwm_ext_L-12_H-768_A-12", "roberta"),
    "NEZHA": ("nezha_base_wwm", "nezha"),
    "WoBERT": ("chinese_wobert_plus_L-12_H-768_A-12", "wobert"),
    "RoFormer": ("chinese_roformer_L-12_H-768_A-12", "roformer"),
    "SimBERT": ("chinese_simbert_L-12_H-768_A-12", "simbert"),
    "SimBERT-small": ("chinese_simbert_L-6_H-384_A-12", "simbert"),
    "SimBERT-tiny": ("chinese_simbert_L-4_H-312_A-12", "simbert"),
}
# Short names of keras-hub presets, with the text prefix they expect.
PRESETS = {"e5-small": ("multilingual_e5_small", "query: ")}


def check_model(name, flag, checkpoint_root=None):
    """Raises `kcse.arguments.UsageError` for a model that cannot exist.

    See `kcse.arguments.check_model_name`: missing files and folders, Su's
    names without `--checkpoint-root`, unknown families and presets.
    """
    arguments.check_model_name(
        name, flag, checkpoint_root,
        su_checkpoints={model: folder for model, (folder, _) in SU_CHECKPOINTS.items()},
        short_names=tuple(PRESETS), families=FAMILIES,
    )
